// The module's diagnostic port, the serial monitor on its own line and the
// firmware constants by name, over real ptys from socat: every console command, garbage,
// preferences across a restart, and a firmware update that flips the prefix end to end through
// the gateway with coap-client.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { run } from '../../../src/cli/device.ts';
import { loadDeviceConfig } from '../../../src/device/config.ts';
import { firmwareImage } from '../../../src/device/firmware.ts';
import { Kit } from '../../../src/device/kit.ts';
import { KitRunner } from '../../../src/device/runner.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { tempDir } from '../../helpers/server.ts';
import { ptyPair, Terminal, waitFor } from '../../helpers/device.ts';

const base = { host: '127.0.0.1', port: 0, monitorWindowMs: 0, logLevel: 0, periodMs: 200, allowDirect: false } as const;

describe('diagnostic port: commands', () => {
  let pty: Awaited<ReturnType<typeof ptyPair>>;
  let runner: KitRunner;
  let term: Terminal;
  let stateDir: string;

  before(async () => {
    pty = await ptyPair();
    stateDir = tempDir('reef-kit-state-');
    runner = new KitRunner(loadDeviceConfig({ ...base, mac: '00000000000016c1', diag: pty.a, stateDir }));
    term = await Terminal.open(pty.b);
    await runner.start();
    await waitFor(() => term.text.endsWith('> '), 5000, 'the banner and prompt');
  });
  after(async () => {
    term.close();
    await runner.stop();
    pty.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  test('the line runs at 115200 baud', () => {
    assert.equal(execFileSync('stty', ['-F', pty.a, 'speed'], { encoding: 'utf8' }).trim(), '115200');
    assert.match(term.text, /diagnostic port \(115200 baud\)/);
  });

  test('help lists every command; show lists the system variables; show NAME one', async () => {
    const help = await term.command('help');
    for (const c of ['show', 'set NAME VALUE', 'save', 'prefs', 'prefs clear', 'fw load', 'fw cancel', 'reboot']) assert.ok(help.includes(c), c);
    const all = await term.command('show');
    for (const v of ['mac', 'fw', 'prefix', 'host', 'mesh_domain', 'gateway', 'log_level', 'period', 'max_age']) assert.match(all, new RegExp(`^${v}\\s`, 'm'));
    assert.match(all, /^host\s+SSN00000000000016C1\.mesh\.reef\.local$/m);
    assert.equal(await term.command('show fw'), 'fw = 1.2.1000.117958');
    assert.match(await term.command('show nope'), /^error: no variable "nope"/);
  });

  test('set: LOG_LEVEL by name applies at once; the others at reboot; bad values are refused with the reason', async () => {
    assert.equal(await term.command('set log_level LOG_DEBUG'), 'log_level = 7 (DEBG)');
    assert.equal(runner.kit.log.level, 7);
    assert.equal(await term.command('set log_level 0'), 'log_level = 0 (EMRG)');
    assert.match(await term.command('set period 5s'), /^period = 5s \(at the next reboot; save keeps it\)$/);
    assert.match(await term.command('set gateway 127.0.0.1:5999'), /^gateway = 127\.0\.0\.1:5999/);
    assert.match(await term.command('set mesh_domain lab.example'), /^mesh_domain = lab\.example/);
    assert.match(await term.command('set max_age 30'), /^max_age = 30/);
    assert.match(await term.command('set period soon'), /^error: period: periodMs .* not readable/);
    assert.match(await term.command('set log_level 9'), /^error: log_level: logLevel .* must be 0\.\.7/);
    assert.match(await term.command('set mac xyz'), /^error: mac: mac .* 16 hexadecimal/);
    assert.match(await term.command('set fw 1.2.1000.1'), /^error: "fw" cannot be set/);
    assert.match(await term.command('set period'), /^error: usage: set NAME VALUE/);
    assert.equal(runner.running.periodMs, 5000);
  });

  test('garbage, unknown commands and over-long lines get an error line, and the console keeps working', async () => {
    assert.match(await term.command('frobnicate now'), /^error: unknown command "frobnicate"/);
    term.write(Buffer.from([0x00, 0xff, 0x1b, 0x5b, 0x41, 0x7e, 0x80]));
    assert.match(await term.command(''), /^error: not a command \(unprintable characters\)/);
    assert.match(await term.command('x'.repeat(5000)), /^error: line longer than 256 characters ignored/);
    assert.match(await term.command('fw bogus'), /^error: usage: fw \[load\|cancel\]/);
    assert.match(await term.command('prefs what'), /^error: usage: prefs \[clear\]/);
    assert.match(await term.command('show mac'), /^mac = 00000000000016c1$/);
  });

  test('save keeps the variables in a 0600 file; prefs shows them; a restarted kit comes up with them; prefs clear erases them', async () => {
    assert.match(await term.command('save'), /^saved to .*00000000000016c1\.json$/);
    const file = path.join(stateDir, '00000000000016c1.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.match(await term.command('prefs'), /"periodMs":5000/);
    // A restart of the process: a new runner on the same state directory.
    const again = new KitRunner(loadDeviceConfig({ ...base, mac: '00000000000016c1', stateDir }));
    assert.equal(again.running.periodMs, 5000);
    assert.equal(again.running.meshDomain, 'lab.example');
    assert.deepEqual(again.running.gateway, { address: '127.0.0.1', port: 5999 });
    assert.equal(await term.command('prefs clear'), 'preferences erased');
    assert.equal(await term.command('prefs'), 'no saved preferences');
    assert.equal(new KitRunner(loadDeviceConfig({ ...base, mac: '00000000000016c1', stateDir })).running.periodMs, 200);
  });

  test('fw load refuses a damaged or foreign image and loads nothing; fw cancel drops a loaded one', async () => {
    assert.match(await term.command('fw'), /^fw 1\.2\.1000\.117958, prefix \/snsr\nno image loaded$/);
    const good = firmwareImage('1.2.1000.112738').trimEnd().split('\n');
    const damaged = [...good];
    damaged[3] = damaged[3]!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'));
    // `fw load` answers one line (no prompt), then takes the image up to its "end" line.
    const load = async (lines: string[]): Promise<string> => {
      const answer = (await term.command(['fw load', ...lines].join('\r'))).split('\n');
      assert.equal(answer[0], 'send the image; it ends with a line "end"');
      return answer.slice(1).join('\n');
    };
    assert.match(await load(damaged), /^error: the body does not match its sha256.*nothing loaded$/);
    assert.match(await load(['hello', 'world', 'end']), /^error: not a firmware image/);
    assert.equal(runner.pendingImage, undefined);
    assert.match(await load(good), /^image 1\.2\.1000\.112738 loaded \(\d+ bytes, sha256 ok\); reboot to run it \(prefix \/sensor\)$/);
    assert.match(await term.command('fw'), /loaded image 1\.2\.1000\.112738/);
    assert.equal(await term.command('fw cancel'), 'image dropped');
    assert.equal(runner.pendingImage, undefined);
  });
});

describe('firmware update through the console, end to end through the gateway', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let pty: Awaited<ReturnType<typeof ptyPair>>;
  let runner: KitRunner;
  let term: Terminal;
  let stateDir: string;
  const MAC = '00000000000016d1';

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    const account = (await h.t.services.store.getAccountByTenantId(alice.tenantId))!;
    const { kitKey } = await provisionKit(h.t.services.store, null, account, MAC);
    pty = await ptyPair();
    stateDir = tempDir('reef-kit-state-');
    runner = new KitRunner(loadDeviceConfig({ ...base, mac: MAC, key: kitKey, gateway: { address: '127.0.0.1', port: h.addr.port }, diag: pty.a, stateDir }));
    term = await Terminal.open(pty.b);
    await runner.start();
    await until(() => h.gw.gateway.kits.get(MAC)?.prefix === 'snsr', 'the gateway learns the kit');
    await waitFor(() => term.text.endsWith('> '), 5000, 'the prompt');
  });
  after(async () => {
    term.close();
    await runner.stop();
    pty.close();
    await h.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  const update = async (version: string): Promise<string> => {
    const loaded = await term.command(['fw load', ...firmwareImage(version).trimEnd().split('\n')].join('\r'));
    assert.match(loaded, new RegExp(`\nimage ${version.replace(/\./g, '\\.')} loaded`));
    return term.command('reboot', 30_000);
  };

  test('an update across build 117958 flips the prefix, the kit announces it, and coap-client through the gateway sees it', async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const before = await viaGateway(h, port, MAC, '/.well-known/core');
    assert.match(before.stdout, /<\/snsr\/arduino\/temp>/);

    assert.match(await update('1.2.1000.112738'), /up: fw 1\.2\.1000\.112738, prefix \/sensor, udp 127\.0\.0\.1:\d+$/);
    assert.equal(runner.kit.module.prefix, 'sensor');
    await until(() => h.gw.gateway.kits.get(MAC)?.prefix === 'sensor', 'the gateway learns the new prefix');
    const old = await viaGateway(h, port, MAC, '/.well-known/core');
    assert.match(old.stdout, /<\/sensor\/arduino\/temp>/);
    await until(async () => /^\d+,-?\d+\.\d\d,[CF]$/.test((await viaGateway(h, port, MAC, '/sensor/arduino/temp?sens')).stdout.trim()), 'a reading under /sensor');
    // The firmware was saved: a restart of the kit keeps it.
    assert.equal(new KitRunner(loadDeviceConfig({ ...base, mac: MAC, stateDir })).running.firmware, '1.2.1000.112738');

    assert.match(await update('1.2.1000.117958'), /up: fw 1\.2\.1000\.117958, prefix \/snsr/);
    await until(() => h.gw.gateway.kits.get(MAC)?.prefix === 'snsr', 'the gateway learns the prefix again');
    const back = await viaGateway(h, port, MAC, '/.well-known/core');
    assert.match(back.stdout, /<\/snsr\/arduino\/temp>/);
  });
});

describe('serial monitor on its own line (SER_MON_PTR) and constants by name', () => {
  test('reef device --monitor attached within the window shows the kit log; after the window the output stays off', async () => {
    const pty = await ptyPair();
    const lines: string[] = [];
    let stop!: () => void;
    const until2 = new Promise<void>((r) => (stop = r));
    // The monitor window is long; the kit waits for a monitor, and the monitor attaches at once.
    const kit = new Kit(loadDeviceConfig({ ...base, mac: '00000000000016e1', serMonPtr: pty.a, monitorWindowMs: 60_000, logLevel: 'LOG_INFO' }));
    try {
      const started = kit.start();
      const done = run(['--monitor', pty.b], { out: (l) => lines.push(l), err: () => undefined, until: until2 });
      await started;
      await waitFor(() => lines.some((l) => / NOTE .*kit 00000000000016e1 up on 127\.0\.0\.1:\d+ \(prefix \/snsr/.test(l)), 10_000, 'the kit log on the monitor');
      assert.ok(lines.some((l) => /serial monitor attached/.test(l)));
      assert.equal(kit.log.level, 6, 'LOG_INFO is level 6');
      stop();
      assert.equal(await done, 0);
    } finally {
      await kit.stop();
      pty.close();
    }
  });

  test('a monitor that connects after the window gets nothing', async () => {
    const pty = await ptyPair();
    const kit = new Kit(loadDeviceConfig({ ...base, mac: '00000000000016e2', serMonPtr: pty.a, monitorWindowMs: 10 }));
    const term = await Terminal.open(pty.b);
    try {
      await kit.start(); // no monitor: the window passes, the CoAP server starts with output off
      // The window is closed once start() has returned, whatever the clocks say (it used to be a
      // Date.now() comparison that a timer firing on the 10th millisecond left open a little longer).
      assert.equal(
        kit.attachMonitor(() => undefined),
        false,
      );
      term.write('\r\n');
      // Counted once per line per reset, however many chunks the late monitor's input arrives in.
      await waitFor(() => kit.monitorRefused === 1, 5000, 'the late monitor is refused');
      assert.equal(kit.log.sink, undefined);
      assert.equal(term.text, '');
    } finally {
      term.close();
      await kit.stop();
      pty.close();
    }
  });

  test('LOG_LEVEL names, UART_PTR as the HDLC paths, and their errors', () => {
    const env = { REEF_DEVICE_LOG_LEVEL: 'LOG_DEBUG', REEF_DEVICE_UART_PTR: '/dev/a,/dev/b', REEF_DEVICE_SER_MON_PTR: '/dev/m' };
    const c = loadDeviceConfig({}, env);
    assert.equal(c.logLevel, 7);
    assert.deepEqual(c.serial, ['/dev/a', '/dev/b']);
    assert.equal(c.serMonPtr, '/dev/m');
    for (const [name, n] of [
      ['LOG_ERR', 3],
      ['warning', 4],
      ['NOTE', 5],
      ['log_none', 0],
      ['6', 6],
    ] as const)
      assert.equal(loadDeviceConfig({ logLevel: name }).logLevel, n, name);
    assert.throws(() => loadDeviceConfig({ logLevel: 'LOUD' }), /logLevel \(REEF_DEVICE_LOG_LEVEL\) is not readable/);
    assert.throws(() => loadDeviceConfig({ uartPtr: '/dev/a,/dev/b', serial: '/dev/c,/dev/d' }), /uartPtr .* names other paths than serial/);
  });
});
