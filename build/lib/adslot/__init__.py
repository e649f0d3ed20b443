"""adslot: an ad server for digital-out-of-home screens."""

__version__ = "0.1.0"
