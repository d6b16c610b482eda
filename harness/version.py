"""The core's version (``harness.__version__``), here so that any module can read it without
importing the public API."""

__version__ = "0.1.0"
