"""Outbound HTTP for the platform: the address guard, the pinned transport, and scripts' `fetch`
through each tenant's egress allowlist. Imports only db, errors and settings."""
