"""One module per command family: `add_arguments(name, parser)` and `run(name, args)`."""
