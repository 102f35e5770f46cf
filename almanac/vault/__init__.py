"""Tenants' secrets at rest: the operator's key (`keyring`), the tenant's secrets table (`store`),
and the redaction of their values from what a run leaves behind (`redact`).
Imports only db, errors and settings."""
