"""errorkb: SGLang's errors, extracted from its source, as a static site and JSON API."""

__version__ = "0.1.0"
