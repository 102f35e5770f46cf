CREATE SCHEMA public;

CREATE FUNCTION public.almanac_delivery_signal() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    -- Two statements, not a CASE: each branch names a column only its own table has.
    IF TG_TABLE_NAME = 'events' THEN
        INSERT INTO public.delivery_signals (tenant_slug, at) VALUES (slug, NEW.created_at);
    ELSE
        -- A delivery that ended (NULL) may release the later events held back behind it: look now.
        INSERT INTO public.delivery_signals (tenant_slug, at)
        VALUES (slug, COALESCE(NEW.next_attempt_at, NEW.updated_at));
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.almanac_delivery_signal_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    -- Two statements, not a CASE: each branch names a column only its own table has.
    IF TG_TABLE_NAME = 'events' THEN
        INSERT INTO public.delivery_signals (tenant_slug, at) VALUES (slug, NEW.created_at);
    ELSE
        -- A delivery that ended (NULL) may release the later events held back behind it: look now.
        INSERT INTO public.delivery_signals (tenant_slug, at)
        VALUES (slug, COALESCE(NEW.next_attempt_at, NEW.updated_at));
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.almanac_due_index() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM public.due_index WHERE tenant_slug = slug AND occurrence_id = OLD.id;
    END IF;
    IF TG_OP = 'DELETE' OR NEW.due_at IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    VALUES (slug, NEW.id, NEW.due_at, NEW.priority)
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.almanac_due_index_inserted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT replace(substr(TG_TABLE_SCHEMA, 3), '_', '-'), id, due_at, priority FROM inserted
    WHERE due_at IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.almanac_due_index_inserted_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT replace(substr(TG_TABLE_SCHEMA, 3), '_', '-'), id, due_at, priority FROM inserted
    WHERE due_at IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.almanac_due_index_moved(slugs character varying[], ids integer[], dues timestamp with time zone[], priorities integer[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    written integer;
BEGIN
    DELETE FROM public.due_index AS d USING unnest(slugs, ids) AS g(slug, id)
    WHERE d.tenant_slug = g.slug AND d.occurrence_id = g.id;
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT slug, id, due, priority FROM unnest(slugs, ids, dues, priorities) AS n(slug, id, due, priority)
    WHERE due IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$;

CREATE FUNCTION public.almanac_due_index_moved_v2(p_slugs character varying[], p_ids integer[], p_dues timestamp with time zone[], p_priorities integer[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    written integer;
BEGIN
    DELETE FROM public.due_index AS d USING unnest(p_slugs, p_ids) AS g(slug, id)
    WHERE d.tenant_slug = g.slug AND d.occurrence_id = g.id;
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT slug, id, due, priority FROM unnest(p_slugs, p_ids, p_dues, p_priorities) AS n(slug, id, due, priority)
    WHERE due IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$;

CREATE FUNCTION public.almanac_due_index_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM public.due_index WHERE tenant_slug = slug AND occurrence_id = OLD.id;
    END IF;
    IF TG_OP = 'DELETE' OR NEW.due_at IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    VALUES (slug, NEW.id, NEW.due_at, NEW.priority)
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$;

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE public.api_tokens (
    id integer NOT NULL,
    tenant_id integer NOT NULL,
    name character varying(200) NOT NULL,
    role character varying(10) NOT NULL,
    public_id character varying(20) NOT NULL,
    secret_hash character varying(64) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone
);

CREATE SEQUENCE public.api_tokens_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.api_tokens_id_seq OWNED BY public.api_tokens.id;

CREATE TABLE public.audit_entries (
    id integer NOT NULL,
    tenant_id integer NOT NULL,
    at timestamp with time zone NOT NULL,
    actor_kind character varying(10) NOT NULL,
    actor character varying(320) NOT NULL,
    actor_id integer,
    address character varying(64),
    action character varying(64) NOT NULL,
    target character varying(300),
    changes text NOT NULL
);

CREATE SEQUENCE public.audit_entries_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.audit_entries_id_seq OWNED BY public.audit_entries.id;

CREATE TABLE public.delivery_signals (
    id bigint NOT NULL,
    tenant_slug character varying(40) NOT NULL,
    at timestamp with time zone NOT NULL
);

ALTER TABLE public.delivery_signals ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.delivery_signals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.due_index (
    tenant_slug character varying(40) NOT NULL,
    occurrence_id integer NOT NULL,
    due_at timestamp with time zone NOT NULL,
    priority integer NOT NULL
);

CREATE TABLE public.invitations (
    id integer NOT NULL,
    tenant_id integer NOT NULL,
    email character varying(320) NOT NULL,
    role character varying(10) NOT NULL,
    token_hash character varying(64) NOT NULL,
    invited_by character varying(320) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    accepted_at timestamp with time zone,
    accepted_user_id integer,
    revoked_at timestamp with time zone
);

CREATE SEQUENCE public.invitations_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.invitations_id_seq OWNED BY public.invitations.id;

CREATE TABLE public.memberships (
    id integer NOT NULL,
    user_id integer NOT NULL,
    tenant_id integer NOT NULL,
    role character varying(10) NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.memberships_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.memberships_id_seq OWNED BY public.memberships.id;

CREATE TABLE public.tenant_quotas (
    tenant_slug character varying(40) NOT NULL,
    kv_mb integer,
    kv_keys integer,
    schedules integer,
    pending_jobs integer,
    runs_per_day integer,
    cpu_seconds_per_day integer,
    updated_at timestamp with time zone NOT NULL,
    retention_days integer
);

CREATE TABLE public.tenant_turns (
    tenant_slug character varying(40) NOT NULL,
    served_at timestamp with time zone NOT NULL
);

CREATE TABLE public.tenants (
    id integer NOT NULL,
    slug character varying(40) NOT NULL,
    name character varying(200) NOT NULL,
    min_interval_seconds integer NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.tenants_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.tenants_id_seq OWNED BY public.tenants.id;

CREATE TABLE public.timer_leases (
    tenant_slug character varying(40) NOT NULL,
    owner character varying(100),
    token character varying(32),
    expires_at timestamp with time zone
);

CREATE TABLE public.users (
    id integer NOT NULL,
    email character varying(320) NOT NULL,
    password_hash character varying(200) NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.users_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.users_id_seq OWNED BY public.users.id;

CREATE TABLE public.web_sessions (
    id_hash character varying(64) NOT NULL,
    user_id integer,
    data text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE public.worker_heartbeats (
    owner character varying(100) NOT NULL,
    started_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.api_tokens ALTER COLUMN id SET DEFAULT nextval('public.api_tokens_id_seq'::regclass);

ALTER TABLE ONLY public.audit_entries ALTER COLUMN id SET DEFAULT nextval('public.audit_entries_id_seq'::regclass);

ALTER TABLE ONLY public.invitations ALTER COLUMN id SET DEFAULT nextval('public.invitations_id_seq'::regclass);

ALTER TABLE ONLY public.memberships ALTER COLUMN id SET DEFAULT nextval('public.memberships_id_seq'::regclass);

ALTER TABLE ONLY public.tenants ALTER COLUMN id SET DEFAULT nextval('public.tenants_id_seq'::regclass);

ALTER TABLE ONLY public.users ALTER COLUMN id SET DEFAULT nextval('public.users_id_seq'::regclass);

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT pk_api_tokens PRIMARY KEY (id);

ALTER TABLE ONLY public.audit_entries
    ADD CONSTRAINT pk_audit_entries PRIMARY KEY (id);

ALTER TABLE ONLY public.delivery_signals
    ADD CONSTRAINT pk_delivery_signals PRIMARY KEY (id);

ALTER TABLE ONLY public.due_index
    ADD CONSTRAINT pk_due_index PRIMARY KEY (tenant_slug, occurrence_id);

ALTER TABLE ONLY public.invitations
    ADD CONSTRAINT pk_invitations PRIMARY KEY (id);

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT pk_memberships PRIMARY KEY (id);

ALTER TABLE ONLY public.tenant_quotas
    ADD CONSTRAINT pk_tenant_quotas PRIMARY KEY (tenant_slug);

ALTER TABLE ONLY public.tenant_turns
    ADD CONSTRAINT pk_tenant_turns PRIMARY KEY (tenant_slug);

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT pk_tenants PRIMARY KEY (id);

ALTER TABLE ONLY public.timer_leases
    ADD CONSTRAINT pk_timer_leases PRIMARY KEY (tenant_slug);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT pk_users PRIMARY KEY (id);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT pk_web_sessions PRIMARY KEY (id_hash);

ALTER TABLE ONLY public.worker_heartbeats
    ADD CONSTRAINT pk_worker_heartbeats PRIMARY KEY (owner);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT uq_api_tokens_public_id UNIQUE (public_id);

ALTER TABLE ONLY public.invitations
    ADD CONSTRAINT uq_invitations_token_hash UNIQUE (token_hash);

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT uq_memberships_user_id_tenant_id UNIQUE (user_id, tenant_id);

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT uq_tenants_slug UNIQUE (slug);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT uq_users_email UNIQUE (email);

CREATE INDEX ix_api_tokens_tenant_id ON public.api_tokens USING btree (tenant_id);

CREATE INDEX ix_audit_entries_tenant_id_id ON public.audit_entries USING btree (tenant_id, id);

CREATE INDEX ix_delivery_signals_at ON public.delivery_signals USING btree (at);

CREATE INDEX ix_due_index_due_at ON public.due_index USING btree (due_at);

CREATE INDEX ix_invitations_tenant_id ON public.invitations USING btree (tenant_id);

CREATE INDEX ix_memberships_tenant_id ON public.memberships USING btree (tenant_id);

CREATE INDEX ix_memberships_user_id ON public.memberships USING btree (user_id);

CREATE INDEX ix_timer_leases_owner ON public.timer_leases USING btree (owner);

CREATE INDEX ix_web_sessions_expires_at ON public.web_sessions USING btree (expires_at);

CREATE INDEX ix_web_sessions_user_id ON public.web_sessions USING btree (user_id);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT fk_api_tokens_tenant_id_tenants FOREIGN KEY (tenant_id) REFERENCES public.tenants(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.audit_entries
    ADD CONSTRAINT fk_audit_entries_tenant_id_tenants FOREIGN KEY (tenant_id) REFERENCES public.tenants(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.invitations
    ADD CONSTRAINT fk_invitations_accepted_user_id_users FOREIGN KEY (accepted_user_id) REFERENCES public.users(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.invitations
    ADD CONSTRAINT fk_invitations_tenant_id_tenants FOREIGN KEY (tenant_id) REFERENCES public.tenants(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT fk_memberships_tenant_id_tenants FOREIGN KEY (tenant_id) REFERENCES public.tenants(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT fk_memberships_user_id_users FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT fk_web_sessions_user_id_users FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
