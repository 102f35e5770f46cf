CREATE INDEX ix_api_tokens_tenant_id ON api_tokens (tenant_id);
CREATE INDEX ix_audit_entries_tenant_id_id ON audit_entries (tenant_id, id);
CREATE INDEX ix_delivery_signals_at ON delivery_signals (at);
CREATE INDEX ix_due_index_due_at ON due_index (due_at);
CREATE INDEX ix_invitations_tenant_id ON invitations (tenant_id);
CREATE INDEX ix_memberships_tenant_id ON memberships (tenant_id);
CREATE INDEX ix_memberships_user_id ON memberships (user_id);
CREATE INDEX ix_timer_leases_owner ON timer_leases (owner);
CREATE INDEX ix_web_sessions_expires_at ON web_sessions (expires_at);
CREATE INDEX ix_web_sessions_user_id ON web_sessions (user_id);
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE "api_tokens" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	tenant_id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	role VARCHAR(10) NOT NULL, 
	public_id VARCHAR(20) NOT NULL, 
	secret_hash VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	last_used_at DATETIME, 
	revoked_at DATETIME, 
	CONSTRAINT fk_api_tokens_tenant_id_tenants FOREIGN KEY(tenant_id) REFERENCES tenants (id) ON DELETE CASCADE, 
	CONSTRAINT uq_api_tokens_public_id UNIQUE (public_id)
);
CREATE TABLE "audit_entries" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	tenant_id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	actor_kind VARCHAR(10) NOT NULL, 
	actor VARCHAR(320) NOT NULL, 
	actor_id INTEGER, 
	address VARCHAR(64), 
	action VARCHAR(64) NOT NULL, 
	target VARCHAR(300), 
	changes TEXT NOT NULL, 
	CONSTRAINT fk_audit_entries_tenant_id_tenants FOREIGN KEY(tenant_id) REFERENCES tenants (id) ON DELETE CASCADE
);
CREATE TABLE delivery_signals (
	id BIGINT NOT NULL, 
	tenant_slug VARCHAR(40) NOT NULL, 
	at DATETIME NOT NULL, 
	CONSTRAINT pk_delivery_signals PRIMARY KEY (id)
);
CREATE TABLE due_index (
	tenant_slug VARCHAR(40) NOT NULL, 
	occurrence_id INTEGER NOT NULL, 
	due_at DATETIME NOT NULL, 
	priority INTEGER NOT NULL, 
	CONSTRAINT pk_due_index PRIMARY KEY (tenant_slug, occurrence_id)
);
CREATE TABLE "invitations" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	tenant_id INTEGER NOT NULL, 
	email VARCHAR(320) NOT NULL, 
	role VARCHAR(10) NOT NULL, 
	token_hash VARCHAR(64) NOT NULL, 
	invited_by VARCHAR(320) NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	accepted_at DATETIME, 
	accepted_user_id INTEGER, 
	revoked_at DATETIME, 
	CONSTRAINT fk_invitations_tenant_id_tenants FOREIGN KEY(tenant_id) REFERENCES tenants (id) ON DELETE CASCADE, 
	CONSTRAINT fk_invitations_accepted_user_id_users FOREIGN KEY(accepted_user_id) REFERENCES users (id) ON DELETE SET NULL, 
	CONSTRAINT uq_invitations_token_hash UNIQUE (token_hash)
);
CREATE TABLE "memberships" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	user_id INTEGER NOT NULL, 
	tenant_id INTEGER NOT NULL, 
	role VARCHAR(10) NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT fk_memberships_user_id_users FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE, 
	CONSTRAINT fk_memberships_tenant_id_tenants FOREIGN KEY(tenant_id) REFERENCES tenants (id) ON DELETE CASCADE, 
	CONSTRAINT uq_memberships_user_id_tenant_id UNIQUE (user_id, tenant_id)
);
CREATE TABLE tenant_quotas (
	tenant_slug VARCHAR(40) NOT NULL, 
	kv_mb INTEGER, 
	kv_keys INTEGER, 
	schedules INTEGER, 
	pending_jobs INTEGER, 
	runs_per_day INTEGER, 
	cpu_seconds_per_day INTEGER, 
	updated_at DATETIME NOT NULL, retention_days INTEGER, 
	CONSTRAINT pk_tenant_quotas PRIMARY KEY (tenant_slug)
);
CREATE TABLE tenant_turns (
	tenant_slug VARCHAR(40) NOT NULL, 
	served_at DATETIME NOT NULL, 
	CONSTRAINT pk_tenant_turns PRIMARY KEY (tenant_slug)
);
CREATE TABLE "tenants" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	slug VARCHAR(40) NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	min_interval_seconds INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT uq_tenants_slug UNIQUE (slug)
);
CREATE TABLE timer_leases (
	tenant_slug VARCHAR(40) NOT NULL, 
	owner VARCHAR(100), 
	token VARCHAR(32), 
	expires_at DATETIME, 
	CONSTRAINT pk_timer_leases PRIMARY KEY (tenant_slug)
);
CREATE TABLE "users" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	email VARCHAR(320) NOT NULL, 
	password_hash VARCHAR(200) NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT uq_users_email UNIQUE (email)
);
CREATE TABLE web_sessions (
	id_hash VARCHAR(64) NOT NULL, 
	user_id INTEGER, 
	data TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	CONSTRAINT pk_web_sessions PRIMARY KEY (id_hash), 
	CONSTRAINT fk_web_sessions_user_id_users FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE
);
CREATE TABLE worker_heartbeats (
	owner VARCHAR(100) NOT NULL, 
	started_at DATETIME NOT NULL, 
	seen_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	CONSTRAINT pk_worker_heartbeats PRIMARY KEY (owner)
);
