"""Alembic environment for the shared schema; the connection is passed in by almanac.tenants.migrations."""

from alembic import context

from almanac.db import SharedBase
import almanac.platform.store.coordination_models  # noqa: F401  (timer leases, heartbeats)
import almanac.platform.store.quotas  # noqa: F401  (quota overrides)
import almanac.tenants.models  # noqa: F401  (tenants, people, tokens)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SharedBase.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
