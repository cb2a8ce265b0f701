"""Reviewed compatibility data, shipped in the wheel as ``doctor.compat``. Every row names its source."""
