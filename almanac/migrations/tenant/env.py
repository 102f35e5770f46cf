"""Alembic environment for one tenant's schema.

The connection arrives with `schema_translate_map={"tenant": <real schema>}`; operations name the
placeholder schema "tenant". The version table is kept inside the tenant's own schema.
"""

from alembic import context

from almanac.db import TenantBase

connection = context.config.attributes["connection"]
schema = context.config.attributes["schema"]
context.configure(
    connection=connection,
    target_metadata=TenantBase.metadata,
    version_table_schema=schema,
    include_schemas=True,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
