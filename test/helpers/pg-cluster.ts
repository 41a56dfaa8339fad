// Throw-away PostgreSQL 15 clusters of their own for failover tests and benches: a primary and a
// synchronous streaming standby made with Debian's tools (initdb, pg_ctl, pg_basebackup -R), on free
// loopback ports, data under a temporary directory, trust authentication on 127.0.0.1 (replication
// included). Never the shared cluster on 5432. Run as root, the tools run as the `postgres` user
// (runuser); run as anyone else, as that user.
//
//   const pgc = await startPrimaryAndStandby();
//   pgc.url()                     // postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres
//   await pgc.kill(pgc.primary)   // SIGKILL of the postmaster; resolves once its port refuses
//   await pgc.promote(pgc.standby)
//   await pgc.rejoin(pgc.primary, pgc.standby)  // the old primary, a synchronous standby of the new
//   await pgc.stop()              // every cluster stopped and its directory removed (also at exit)
//
// Synchronous: the primary has synchronous_standby_names = '*', so a commit is acknowledged only
// once the standby has flushed it (synchronous_commit = on, the default): what is acknowledged
// survives the primary's death. The throw-away primary runs with fsync = off (a killed process
// loses nothing the kernel holds); the standby keeps fsync, wal_level and its replication settings
// as a real one has them.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';
import { waitFor } from './wait.ts';

export const PG_BIN = process.env.REEF_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';

const run = promisify(execFile);
const asRoot = process.getuid?.() === 0;

export interface PgNode {
  /** primary, standby (as made; a promoted standby keeps its name). */
  readonly name: string;
  readonly port: number;
  readonly dataDir: string;
  readonly logFile: string;
  /** A URL of this node alone. */
  url(db?: string): string;
  /** Whether its postmaster runs (as this helper knows: started and neither stopped nor killed). */
  running: boolean;
}

export interface PgCluster {
  readonly primary: PgNode;
  readonly standby: PgNode;
  readonly nodes: readonly PgNode[];
  /** Both nodes in one URL, primary first: what Reef is given. */
  url(db?: string): string;
  /** SIGKILL to the node's postmaster (a crash, no shutdown); resolves once its port refuses connections. */
  kill(node: PgNode): Promise<void>;
  /** `pg_ctl promote -w`: the standby leaves recovery and accepts writes. */
  promote(node: PgNode): Promise<void>;
  /** A clean restart (`pg_ctl stop -m fast`, then start): every connection to the node is ended. */
  restart(node: PgNode): Promise<void>;
  /**
   * A dead node made a synchronous standby of `primary` again (after a failover): its data replaced
   * by a fresh pg_basebackup -R of the primary, started; then the primary names it in
   * synchronous_standby_names and one commit waits for it, so that everything the primary had
   * acknowledged is on both before this resolves. Until then the primary's commits are on it alone.
   */
  rejoin(node: PgNode, primary: PgNode): Promise<void>;
  /** The last lines of a node's server log (for a failing test's message). */
  logTail(node: PgNode, lines?: number): string;
  /** Stops every node still running and removes the data. Safe to call twice. */
  stop(): Promise<void>;
}

/** A PostgreSQL tool, as the postgres user when we are root. */
function tool(name: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const bin = path.join(PG_BIN, name);
  return asRoot ? run('runuser', ['-u', 'postgres', '--', bin, ...args]) : run(bin, args);
}

function toolSync(name: string, args: string[]): void {
  const bin = path.join(PG_BIN, name);
  if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', bin, ...args], { stdio: 'ignore' });
  else execFileSync(bin, args, { stdio: 'ignore' });
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

/** One statement on a connection of its own, to a node that may be going away. */
export async function query<T = Record<string, unknown>>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return (await c.query(sql, values)).rows as T[];
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Settings of both nodes (the standby copies them with the data and overrides a few). */
function settings(port: number, socketDir: string): string {
  return [
    "listen_addresses = '127.0.0.1'",
    `port = ${port}`,
    `unix_socket_directories = '${socketDir}'`,
    'wal_level = replica',
    'max_wal_senders = 5',
    'hot_standby = on',
    "synchronous_standby_names = '*'",
    'fsync = off',
    'max_connections = 100',
    'shared_buffers = 32MB',
    "log_line_prefix = '%m [%p] '",
    '',
  ].join('\n');
}

const HBA = ['local all all trust', 'local replication all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust', ''].join('\n');

/**
 * A primary and its synchronous standby, both accepting connections, the standby streaming and
 * counted as synchronous by the primary. On a failure midway everything made so far is removed.
 */
export async function startPrimaryAndStandby(): Promise<PgCluster> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-pgc-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    fs.chownSync(base, uid, gid);
  }
  const node = (name: string, port: number): PgNode => ({
    name,
    port,
    dataDir: path.join(base, name),
    logFile: path.join(base, `${name}.log`),
    url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`,
    running: false,
  });
  const primary = node('primary', await freePort());
  const standby = node('standby', await freePort());
  const nodes = [primary, standby];
  let stopped = false;

  const stopSync = () => {
    // At process exit (a test killed by its timeout): nothing asynchronous runs any more.
    for (const n of nodes) {
      if (!n.running) continue;
      try {
        toolSync('pg_ctl', ['-D', n.dataDir, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already gone
      }
    }
    fs.rmSync(base, { recursive: true, force: true });
  };
  process.once('exit', stopSync);

  const cluster: PgCluster = {
    primary,
    standby,
    nodes,
    url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/${db}`,
    async kill(n) {
      const pid = Number(fs.readFileSync(path.join(n.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGKILL');
      n.running = false;
      // Its backends notice the postmaster's death and exit; the listening socket goes with it.
      await waitFor(`${n.name}'s port to refuse connections`, () => refuses(n.port), 30_000);
      await waitFor(`${n.name}'s processes to exit`, () => !processAlive(pid), 30_000);
    },
    async promote(n) {
      await tool('pg_ctl', ['-D', n.dataDir, '-w', '-t', '60', 'promote']);
    },
    async restart(n) {
      await tool('pg_ctl', ['-D', n.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
      n.running = false;
      await tool('pg_ctl', ['-D', n.dataDir, '-l', n.logFile, '-w', '-t', '60', 'start']);
      n.running = true;
    },
    async rejoin(n, p) {
      if (n.running) throw new Error(`${n.name} still runs: kill it before it rejoins`);
      fs.rmSync(n.dataDir, { recursive: true, force: true });
      // The killed postmaster left its socket's lock file, naming its pid; while nobody reaps it
      // (a zombie still answers kill(pid, 0)) PostgreSQL would take it for a live postmaster.
      for (const f of [`.s.PGSQL.${n.port}`, `.s.PGSQL.${n.port}.lock`]) fs.rmSync(path.join(base, f), { force: true });
      try {
        await makeStandby(n, p);
      } catch (e) {
        throw new Error(`could not rebuild ${n.name} as a standby: ${(e as Error).message}\n${cluster.logTail(n, 20)}`);
      }
      // The promoted standby was started without synchronous standbys (settings()' note); a later
      // line of postgresql.conf wins.
      fs.appendFileSync(path.join(p.dataDir, 'postgresql.conf'), "synchronous_standby_names = '*'\n");
      await query(p.url(), 'SELECT pg_reload_conf()');
      await waitSync(p);
      // A commit waits for the standby to flush its WAL, and with it all WAL before it.
      await query(p.url(), 'SELECT txid_current()');
    },
    logTail(n, lines = 40) {
      try {
        return fs.readFileSync(n.logFile, 'utf8').split('\n').slice(-lines).join('\n');
      } catch {
        return '';
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', stopSync);
      for (const n of nodes) {
        if (!n.running) continue;
        await tool('pg_ctl', ['-D', n.dataDir, '-m', 'immediate', '-w', '-t', '60', 'stop']).catch(() => undefined);
        n.running = false;
      }
      fs.rmSync(base, { recursive: true, force: true });
    },
  };

  try {
    await tool('initdb', ['-D', primary.dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '--no-instructions', '-E', 'UTF8', '--locale=C']);
    fs.appendFileSync(path.join(primary.dataDir, 'postgresql.conf'), settings(primary.port, base));
    fs.writeFileSync(path.join(primary.dataDir, 'pg_hba.conf'), HBA);
    await tool('pg_ctl', ['-D', primary.dataDir, '-l', primary.logFile, '-w', '-t', '60', 'start']);
    primary.running = true;

    await makeStandby(standby, primary);
    await waitSync(primary);
  } catch (e) {
    const logs = nodes.map((n) => `${n.name}:\n${cluster.logTail(n, 20)}`).join('\n');
    await cluster.stop();
    throw new Error(`could not make the primary and standby: ${(e as Error).message}\n${logs}`);
  }
  return cluster;
}

/** A streaming standby of `primary` made in `n.dataDir` (empty) and started. */
async function makeStandby(n: PgNode, primary: PgNode): Promise<void> {
  // -R: standby.signal and primary_conninfo, so it starts as a streaming standby of the primary.
  // -c fast: the backup's checkpoint at once; a spread one, on a primary under load, took minutes.
  await tool('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', n.dataDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
  // Later lines win. The standby must not wait for a standby of its own once promoted (with
  // none, every commit would wait forever), and keeps fsync as a real one does.
  fs.appendFileSync(path.join(n.dataDir, 'postgresql.conf'), [`port = ${n.port}`, "synchronous_standby_names = ''", 'fsync = on', ''].join('\n'));
  await tool('pg_ctl', ['-D', n.dataDir, '-l', n.logFile, '-w', '-t', '60', 'start']);
  n.running = true;
}

/** Until the primary counts a standby as synchronous (streaming, sync_state sync). */
async function waitSync(primary: PgNode): Promise<void> {
  await waitFor(
    'the standby to stream as the synchronous standby',
    async () => (await query<{ sync_state: string }>(primary.url(), 'SELECT sync_state FROM pg_stat_replication')).some((r) => r.sync_state === 'sync'),
    60_000,
    50,
  );
}

/** What a primary's replication looks like: its synchronous_standby_names and each standby's state. */
export async function replicationState(primary: PgNode): Promise<{ syncNames: string; standbys: { state: string; syncState: string }[] }> {
  const names = await query<{ s: string }>(primary.url(), "SELECT current_setting('synchronous_standby_names') AS s");
  const rows = await query<{ state: string; sync_state: string }>(primary.url(), 'SELECT state, sync_state FROM pg_stat_replication');
  return { syncNames: names[0]?.s ?? '', standbys: rows.map((r) => ({ state: r.state, syncState: r.sync_state })) };
}

/** Whether a process runs: a zombie (killed, not yet reaped by whoever adopted it) does not. */
function processAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
}
