CREATE INDEX ix_deliveries_next_attempt_at ON deliveries (next_attempt_at);
CREATE INDEX ix_deliveries_status_id ON deliveries (status, id);
CREATE INDEX ix_deliveries_target_id_order_key_event_id ON deliveries (target_id, order_key, event_id);
CREATE INDEX ix_delivery_attempts_delivery_id_id ON delivery_attempts (delivery_id, id);
CREATE INDEX ix_events_created_at ON events (created_at);
CREATE INDEX ix_events_run_id ON events (run_id);
CREATE INDEX ix_jobs_root_key ON jobs (root_key);
CREATE INDEX ix_jobs_script_id ON jobs (script_id);
CREATE INDEX ix_occurrences_done_scheduled_for ON occurrences (scheduled_for) WHERE status = 'done';
CREATE INDEX ix_occurrences_due_at ON occurrences (due_at);
CREATE INDEX ix_occurrences_schedule_id_status ON occurrences (schedule_id, status);
CREATE INDEX ix_runs_created_at ON runs (created_at);
CREATE INDEX ix_runs_job_key_id ON runs (job_key, id);
CREATE INDEX ix_runs_schedule_id_id ON runs (schedule_id, id);
CREATE INDEX ix_runs_status_id ON runs (status, id);
CREATE INDEX ix_schedules_script_id ON schedules (script_id);
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE calendars (
	name VARCHAR(64) NOT NULL, 
	body TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	updated_by VARCHAR(200) NOT NULL, 
	CONSTRAINT pk_calendars PRIMARY KEY (name)
);
CREATE TABLE "deliveries" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	event_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	order_key VARCHAR(220) NOT NULL, 
	status VARCHAR(12) NOT NULL, 
	attempts INTEGER NOT NULL, 
	next_attempt_at DATETIME, 
	lease_token VARCHAR(32), 
	lease_until DATETIME, 
	last_status_code INTEGER, 
	last_error VARCHAR(500), 
	last_latency_ms INTEGER, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT fk_deliveries_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id) ON DELETE CASCADE, 
	CONSTRAINT uq_deliveries_event_id_target_id UNIQUE (event_id, target_id)
);
CREATE TABLE "delivery_attempts" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	delivery_id INTEGER NOT NULL, 
	number INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	outcome VARCHAR(12) NOT NULL, 
	status_code INTEGER, 
	latency_ms INTEGER NOT NULL, 
	error VARCHAR(500), 
	CONSTRAINT fk_delivery_attempts_delivery_id_deliveries FOREIGN KEY(delivery_id) REFERENCES deliveries (id) ON DELETE CASCADE
);
CREATE TABLE egress_hosts (
	entry VARCHAR(300) NOT NULL, 
	position INTEGER NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT pk_egress_hosts PRIMARY KEY (entry)
);
CREATE TABLE "event_fanouts" (
	event_id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	public_id VARCHAR(40) NOT NULL, 
	schedule_id INTEGER, 
	job_key VARCHAR(200), 
	fanned_out_at DATETIME NOT NULL, 
	CONSTRAINT uq_event_fanouts_public_id UNIQUE (public_id)
);
CREATE TABLE "events" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	run_id INTEGER, 
	topic VARCHAR(200) NOT NULL, 
	data TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	delivered_at DATETIME, 
	attempts INTEGER NOT NULL
);
CREATE TABLE "jobs" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	"key" VARCHAR(200) NOT NULL, 
	script_id INTEGER NOT NULL, 
	run_at DATETIME NOT NULL, 
	payload TEXT NOT NULL, 
	expire_after_s INTEGER, 
	max_attempts INTEGER NOT NULL, 
	priority INTEGER NOT NULL, 
	state VARCHAR(10) NOT NULL, 
	root_key VARCHAR(200) NOT NULL, 
	depth INTEGER NOT NULL, 
	created_by_run_id INTEGER, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT uq_jobs_key UNIQUE ("key")
);
CREATE TABLE kv (
	"key" VARCHAR(512) NOT NULL, 
	value TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT pk_kv PRIMARY KEY ("key")
);
CREATE TABLE "occurrences" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	schedule_id INTEGER, 
	job_id INTEGER, 
	schedule_version INTEGER, 
	scheduled_for DATETIME NOT NULL, 
	due_at DATETIME, 
	priority INTEGER NOT NULL, 
	"trigger" VARCHAR(10) NOT NULL, 
	status VARCHAR(10) NOT NULL, 
	attempt INTEGER NOT NULL, 
	lease_token VARCHAR(32), 
	lease_until DATETIME, 
	run_id INTEGER, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT uq_occurrences_schedule_id_scheduled_for UNIQUE (schedule_id, scheduled_for), 
	CONSTRAINT uq_occurrences_job_id_scheduled_for UNIQUE (job_id, scheduled_for)
);
CREATE TABLE "runs" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	occurrence_id INTEGER, 
	schedule_id INTEGER, 
	job_key VARCHAR(200), 
	script_id INTEGER, 
	script_version INTEGER, 
	"trigger" VARCHAR(10) NOT NULL, 
	scheduled_for DATETIME NOT NULL, 
	created_at DATETIME NOT NULL, 
	started_at DATETIME, 
	finished_at DATETIME, 
	status VARCHAR(20) NOT NULL, 
	reason VARCHAR(200), 
	attempt INTEGER NOT NULL, 
	output TEXT, 
	error TEXT, 
	error_line INTEGER, 
	logs TEXT, 
	duration_ms INTEGER, 
	lease_token VARCHAR(32), event TEXT, cpu_ms INTEGER, http TEXT, 
	CONSTRAINT uq_runs_occurrence_id_attempt UNIQUE (occurrence_id, attempt)
);
CREATE TABLE "schedules" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(200) NOT NULL, 
	script_id INTEGER NOT NULL, 
	rule_text TEXT NOT NULL, 
	input_kind VARCHAR(10) NOT NULL, 
	rrule TEXT NOT NULL, 
	timezone VARCHAR(64) NOT NULL, 
	payload TEXT NOT NULL, 
	enabled BOOLEAN NOT NULL, 
	misfire VARCHAR(10) NOT NULL, 
	catchup_window_s INTEGER NOT NULL, 
	overlap VARCHAR(10) NOT NULL, 
	expire_after_s INTEGER, 
	max_attempts INTEGER NOT NULL, 
	retry_backoff_s INTEGER NOT NULL, 
	priority INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	next_run_at DATETIME, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, pause_after_failures INTEGER, failures_in_row INTEGER DEFAULT '0' NOT NULL, paused_reason VARCHAR(200), pause_note VARCHAR(500)
, calendar VARCHAR(64), calendar_policy VARCHAR(10) DEFAULT 'skip' NOT NULL);
CREATE TABLE "script_versions" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	script_id INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	source TEXT NOT NULL, 
	created_at DATETIME NOT NULL, author VARCHAR(320), 
	CONSTRAINT fk_script_versions_script_id_scripts FOREIGN KEY(script_id) REFERENCES scripts (id) ON DELETE CASCADE, 
	CONSTRAINT uq_script_versions_script_id_version UNIQUE (script_id, version)
);
CREATE TABLE "scripts" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(200) NOT NULL, 
	current_version INTEGER NOT NULL, 
	timeout_ms INTEGER NOT NULL, 
	memory_mb INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT uq_scripts_name UNIQUE (name)
);
CREATE TABLE secrets (
	name VARCHAR(64) NOT NULL, 
	value TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT pk_secrets PRIMARY KEY (name)
);
CREATE TABLE "targets" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	kind VARCHAR(10) NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	url VARCHAR(2048), 
	secret VARCHAR(500), 
	recipients TEXT, 
	topics TEXT NOT NULL, 
	subject_template TEXT, 
	body_template TEXT, 
	enabled BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL
);
