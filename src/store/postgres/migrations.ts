// Versioned schema of the PostgreSQL backend. Append only: a released migration is never edited.
// Applied by PostgresStore.migrate() under a session advisory lock, so nodes starting together
// apply each migration exactly once.
//
// Times are epoch milliseconds (bigint), exactly as the SQLite backend stores them: no time-zone or
// float conversion can move an observation across a millisecond. JSON documents are jsonb.
//
// Observations are partitioned in two levels (native declarative partitioning):
//   observations            PARTITION BY LIST (tier)      tier = retention in days, 0 = forever
//     obs_t<tier>           PARTITION BY RANGE (ts)       one per retention in use
//       obs_t<tier>_<date>  a month (or a week for retentions up to 93 days)
//       obs_t<tier>_default timestamps outside every range partition (uploads may carry any time)
// so retention drops whole partitions of a tier, never deletes row by row, and a solution's
// retention is the tier of its devices (devices.tier, kept in step by setRetention).

/** Advisory-lock keys (pg_advisory_lock(bigint)); distinct from any other application's by prefix. */
export const LOCK_MIGRATE = 0x5265_6566_0001n; // "Reef" 1
export const LOCK_PARTITIONS = 0x5265_6566_0002n;
export const LOCK_LEADER = 0x5265_6566_0003n;

export const MIGRATIONS: { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE accounts (
  tenant_id   text COLLATE "C" PRIMARY KEY,
  name        text NOT NULL,
  group_id    text COLLATE "C" NOT NULL,
  client_id   text COLLATE "C" NOT NULL UNIQUE,
  secret_hash text NOT NULL,
  disabled    boolean NOT NULL DEFAULT false,
  created_at  bigint NOT NULL
);
CREATE TABLE signing_keys (
  kid        text COLLATE "C" PRIMARY KEY,
  secret     text NOT NULL,
  created_at bigint NOT NULL
);
CREATE TABLE solutions (
  group_id       text COLLATE "C" NOT NULL,
  name           text COLLATE "C" NOT NULL,
  created_at     bigint NOT NULL,
  -- Days to keep observations; NULL keeps them forever.
  retention_days integer,
  PRIMARY KEY (group_id, name)
);
CREATE TABLE devices (
  pk                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id                text COLLATE "C" NOT NULL UNIQUE,
  tenant_id         text COLLATE "C" NOT NULL,
  group_id          text COLLATE "C" NOT NULL,
  solution          text COLLATE "C" NOT NULL,
  device_type       text COLLATE "C" NOT NULL,
  domain_info       jsonb NOT NULL,
  provisioning_info jsonb,
  mac               text COLLATE "C" CONSTRAINT devices_mac_key UNIQUE,
  created_at        bigint NOT NULL,
  -- The observation partition tier: the solution's retention in days, 0 = forever.
  tier              integer NOT NULL DEFAULT 0
);
CREATE INDEX devices_by_solution ON devices (group_id, solution, pk);

CREATE TABLE observations (
  device_pk   bigint NOT NULL,
  ts          bigint NOT NULL,
  temperature double precision,
  extra       jsonb,
  tier        integer NOT NULL DEFAULT 0
) PARTITION BY LIST (tier);
-- (device, time) is the key (one observation per device per millisecond: the dedupe rule), newest
-- first for the newest-first reads. A unique index on a partitioned table must hold every partition
-- key, hence tier; a device is in exactly one tier at a time, so (device_pk, ts) stays unique.
CREATE UNIQUE INDEX observations_device_ts ON observations (device_pk, ts DESC, tier);

-- The latest observation of each device, kept in the insert's statement so that "latest of all
-- devices" (seed §4.2) never scans history.
CREATE TABLE latest (
  device_pk   bigint PRIMARY KEY,
  ts          bigint NOT NULL,
  temperature double precision,
  extra       jsonb
);
CREATE TABLE state (
  key   text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

-- A tier: the LIST partition of one retention, range-partitioned by time, with a default partition.
CREATE FUNCTION reef_ensure_tier(p_tier integer) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  parent text := 'obs_t' || p_tier;
BEGIN
  IF to_regclass(parent) IS NOT NULL THEN RETURN false; END IF;
  PERFORM pg_advisory_xact_lock(${LOCK_PARTITIONS});
  BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF observations FOR VALUES IN (%s) PARTITION BY RANGE (ts)', parent, p_tier);
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', parent || '_default', parent);
  EXCEPTION WHEN duplicate_table THEN
    RETURN false; -- another node made it first
  END;
  RETURN true;
END
$fn$;

-- A range partition [p_start, p_end) of a tier. Built beside the table and then attached, which
-- takes a SHARE UPDATE EXCLUSIVE lock on the tier (inserts go on) where CREATE TABLE ... PARTITION OF
-- would block them. Rows of the range that earlier landed in the default partition move over first.
CREATE FUNCTION reef_ensure_partition(p_tier integer, p_start bigint, p_end bigint) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  parent text := 'obs_t' || p_tier;
  dflt   text := 'obs_t' || p_tier || '_default';
  part   text := 'obs_t' || p_tier || '_' || to_char(to_timestamp(p_start / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
  IF to_regclass(part) IS NOT NULL THEN RETURN false; END IF;
  PERFORM pg_advisory_xact_lock(${LOCK_PARTITIONS});
  BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE observations INCLUDING DEFAULTS)', part);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (tier = %s AND ts >= %s AND ts < %s)', part, part || '_range', p_tier, p_start, p_end);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE ts >= %s AND ts < %s RETURNING device_pk, ts, temperature, extra, tier) INSERT INTO %I (device_pk, ts, temperature, extra, tier) SELECT * FROM moved', dflt, p_start, p_end, part);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', parent, part, p_start, p_end);
  EXCEPTION WHEN duplicate_table OR invalid_object_definition THEN
    -- Made by another node meanwhile, or the range overlaps an existing partition: nothing to do,
    -- the rows of this range are routed to that partition or to the default one.
    RETURN false;
  END;
  RETURN true;
END
$fn$;

SELECT reef_ensure_tier(0);
`,
  },
  {
    version: 2,
    name: 'event payloads',
    // Live-update events too large for a NOTIFY payload (8000 bytes) wait here for the other nodes
    // (src/events/pg-bus.ts); rows older than a few minutes are swept by the sender.
    sql: 'CREATE TABLE event_payloads (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, created_at bigint NOT NULL, payload text NOT NULL);',
  },
  {
    version: 3,
    name: 'solution version',
    // Bumped with every device created or deleted in the solution (devices never change otherwise),
    // so a node can cache a rendered device list and know, with one cheap read, that it is current.
    sql: 'ALTER TABLE solutions ADD COLUMN version bigint NOT NULL DEFAULT 0;',
  },
  {
    version: 4,
    name: 'devkit wire names',
    // Dev kits carry the original's wire names: provisioningInfo.ssniMacAddress and
    // ssniNetworkDeviceType instead of the seed's vendor* placeholders, and domainInfo.nic_macID.
    // Their solutions' versions move on so no node's cached device list outlives the rewrite.
    sql: `UPDATE devices SET
            provisioning_info = (provisioning_info - 'vendorMacAddress' - 'vendorNetworkDeviceType')
              || jsonb_build_object('ssniMacAddress', mac,
                   'ssniNetworkDeviceType', coalesce(provisioning_info->>'vendorNetworkDeviceType', provisioning_info->>'ssniNetworkDeviceType', 'MILLI')),
            domain_info = domain_info || jsonb_build_object('nic_macID', mac)
          WHERE mac IS NOT NULL AND provisioning_info IS NOT NULL;
          UPDATE solutions s SET version = version + 1
          WHERE EXISTS (SELECT 1 FROM devices d WHERE d.group_id = s.group_id AND d.solution = s.name AND d.mac IS NOT NULL);`,
  },
  {
    version: 5,
    name: 'device templates',
    // Device templates: per tenant group and solution, listed in creation order.
    sql: `CREATE TABLE device_templates (
            pk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id         text COLLATE "C" NOT NULL UNIQUE,
            group_id   text COLLATE "C" NOT NULL,
            solution   text COLLATE "C" NOT NULL,
            name       text NOT NULL,
            sensors    jsonb NOT NULL,
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL
          );
          CREATE INDEX device_templates_by_solution ON device_templates (group_id, solution, pk);`,
  },
  {
    version: 6,
    name: 'alarms',
    // Alarm rules, alarms (the whole record as jsonb beside the columns queries use), the evaluation
    // state of (rule, device) pairs between readings, and webhook deliveries (docs/alarms.md).
    // At most one active alarm per (rule, device): the partial unique index makes a second raise,
    // by another node or a retry, a no-op.
    sql: `
CREATE TABLE alarm_rules (
  id         text COLLATE "C" PRIMARY KEY,
  group_id   text COLLATE "C" NOT NULL,
  tenant_id  text COLLATE "C" NOT NULL,
  solution   text COLLATE "C" NOT NULL,
  device_id  text COLLATE "C",
  spec       jsonb NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);
CREATE INDEX alarm_rules_by_solution ON alarm_rules (group_id, solution, created_at);
CREATE TABLE alarms (
  id         text COLLATE "C" PRIMARY KEY,
  group_id   text COLLATE "C" NOT NULL,
  solution   text COLLATE "C" NOT NULL,
  device_id  text COLLATE "C" NOT NULL,
  rule_id    text COLLATE "C" NOT NULL,
  status     text NOT NULL,
  raised_at  bigint NOT NULL,
  doc        jsonb NOT NULL
);
CREATE UNIQUE INDEX alarms_one_active ON alarms (rule_id, device_id) WHERE status IN ('raised', 'acknowledged');
CREATE INDEX alarms_by_solution ON alarms (group_id, solution, raised_at DESC, id DESC);
CREATE INDEX alarms_active ON alarms (status) WHERE status IN ('raised', 'acknowledged');
CREATE TABLE alarm_states (
  rule_id   text COLLATE "C" NOT NULL,
  device_id text COLLATE "C" NOT NULL,
  state     jsonb NOT NULL,
  PRIMARY KEY (rule_id, device_id)
);
CREATE TABLE alarm_deliveries (
  id         text COLLATE "C" PRIMARY KEY,
  group_id   text COLLATE "C" NOT NULL,
  solution   text COLLATE "C" NOT NULL,
  status     text NOT NULL,
  next_at    bigint NOT NULL,
  created_at bigint NOT NULL,
  doc        jsonb NOT NULL
);
CREATE INDEX alarm_deliveries_due ON alarm_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX alarm_deliveries_by_solution ON alarm_deliveries (group_id, solution, status, created_at DESC, id DESC);
`,
  },
  {
    version: 7,
    name: 'group keys check',
    // A group of uploads whose devices' keys the node already knows goes in one round trip: its
    // head, COPY and COMMIT are sent together, so the head checks the keys itself and fails the
    // transaction (before the COPY runs) when a device was deleted or moved to another tier
    // (src/store/postgres/postgres-store.ts, GROUP_HEAD_KNOWN).
    sql: `CREATE FUNCTION reef_expect_devices(n_found bigint, n_expected integer) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  IF n_found <> n_expected THEN
    RAISE EXCEPTION 'a device of the group was deleted or changed tier' USING ERRCODE = 'RF001';
  END IF;
END
$fn$;`,
  },
  {
    version: 8,
    name: 'devices by tenant',
    // The device quota counts an account's devices before each one is made (QuotaService
    // .checkDevices): without an index that count read every device of every account, 6.1 ms at
    // 100,000 devices against 0.28 with it, round trip included. A plain CREATE INDEX: it holds off device writes while it builds, a moment even for
    // a million devices, where CONCURRENTLY could not run inside the migration's transaction.
    sql: 'CREATE INDEX devices_by_tenant ON devices (tenant_id);',
  },
  {
    version: 9,
    name: 'device counts',
    // Each account's device count, kept by a trigger with every device made or deleted, whatever
    // makes or deletes it: the device quota reads one row, which the insert's trigger holds until
    // commit (PostgresStore.createDevice decides in that transaction), instead of counting the
    // account's devices, a cost that grew with them (docs/performance.md, "Device quota kept as a count"). The
    // trigger is made before the counts are filled in: CREATE TRIGGER holds off device writes
    // until this migration commits, so no device made meanwhile is missed. The tenant index
    // served only the old count.
    sql: `CREATE TABLE device_counts (
  tenant_id text COLLATE "C" PRIMARY KEY,
  n integer NOT NULL
);
CREATE FUNCTION reef_count_devices() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO device_counts (tenant_id, n) VALUES (NEW.tenant_id, 1)
      ON CONFLICT (tenant_id) DO UPDATE SET n = device_counts.n + 1;
    RETURN NEW;
  END IF;
  UPDATE device_counts SET n = n - 1 WHERE tenant_id = OLD.tenant_id;
  RETURN OLD;
END
$fn$;
CREATE TRIGGER devices_counted AFTER INSERT OR DELETE ON devices FOR EACH ROW EXECUTE FUNCTION reef_count_devices();
INSERT INTO device_counts (tenant_id, n) SELECT tenant_id, count(*) FROM devices GROUP BY tenant_id;
DROP INDEX devices_by_tenant;`,
  },
  {
    version: 10,
    name: 'copy flush partition',
    // A partition no row ever stays in: its BEFORE INSERT trigger drops every row routed to it. The
    // store's group COPY puts a marker row for it after every few dozen rows, and a COPY into a
    // partitioned table writes its buffered rows out whenever a row goes to a partition that cannot
    // take buffered inserts (one with BEFORE ROW triggers: PostgreSQL's copyfrom.c). Each buffer
    // then holds a few dozen rows, not a thousand, which keeps PostgreSQL 15 off a per-COPY cost
    // quadratic in the rows buffered (PostgresStore's COPY_BATCH says how, and docs/performance.md,
    // "PostgreSQL: the COPY's buffers kept small", what it saves). Tier -1 is no retention: tiers are 0 or days kept.
    sql: `CREATE TABLE obs_copy_flush PARTITION OF observations FOR VALUES IN (-1);
CREATE FUNCTION reef_skip_row() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN RETURN NULL; END $fn$;
CREATE TRIGGER obs_copy_flush_skip BEFORE INSERT ON obs_copy_flush FOR EACH ROW EXECUTE FUNCTION reef_skip_row();`,
  },
];
