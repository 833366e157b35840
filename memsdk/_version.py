"""The package version, in a module of its own: telemetry reads it without importing the package root."""

__version__ = "0.1.0"
