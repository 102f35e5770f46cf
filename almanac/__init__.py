"""Almanac: a self-hosted, multi-tenant platform that runs code on schedule."""

__version__ = "0.1.0"
