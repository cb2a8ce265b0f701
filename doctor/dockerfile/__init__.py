"""A Dockerfile read as the image it would build: a facts snapshot, without a Docker daemon.

`gpu-doctor check --dockerfile PATH` feeds the result to the same static checks as `check --static` on a
built image. What each line contributes is read, never run:

* ``FROM``: the base image's CUDA / cuDNN / OS / PyTorch from compat/images.toml (tags that name their own
  contents, NGC releases with a row); any other base brings nothing known (python:3.12-slim, ubuntu:24.04).
* ``RUN pip install`` / ``uv pip install`` / ``conda install`` and ``-r requirements*.txt`` (read from the
  build context, the Dockerfile's directory): what they resolve to *today* by the matrix — ``pip install
  torch`` is the newest release's default CUDA build on Linux x86_64; ``--index-url …/cuXYZ`` that flavour.
* ``ENV`` (and the base image's own ENV lines) for LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
  NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, CONDA_OVERRIDE_CUDA …; ``ARG`` defaults substitute.

Nothing is executed: an install on a shell branch (if/case/for, `||`, after a test), a lock-file sync (uv sync,
poetry, pipenv), a script run by its path, a requirements file a RUN clones, is "unknown what this installs" at its
line. Values are bounded (syntax.MAX_VALUE, MAX_DIGITS, image.MAX_STAGES, installs.MAX_COMMANDS): a Dockerfile that
would make them grow is refused with one line (DockerfileError), never read for minutes.

Multi-stage builds: the final stage is judged (with what it inherits from earlier stages it is built FROM
or COPYs --from). Each fact remembers its line, so every finding can point at ``Dockerfile:12``.
"""

from doctor.dockerfile.image import MAX_BYTES, DockerfileError, Image, from_text, read
from doctor.dockerfile.locate import line_for, locate, note_findings
from doctor.dockerfile.syntax import read_instructions, substitute

__all__ = ["MAX_BYTES", "DockerfileError", "Image", "from_text", "line_for", "locate", "note_findings", "read",
           "read_instructions", "substitute"]
