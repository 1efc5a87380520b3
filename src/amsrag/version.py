"""The package version and the on-disk index format version (the ground floor: stores stamp them)."""

__version__ = "0.1.0"
INDEX_FORMAT_VERSION = 1
