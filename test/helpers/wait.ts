// The one waitFor of the tests: polls until `f` gives a truthy value (which it returns). No timing
// assertion: the cap only keeps a broken test from hanging, and it says what was awaited. A throw
// from `f` counts as "not yet" (a server that is restarting), and the last one is reported.
export async function waitFor<T>(what: string, f: () => T | Promise<T>, timeoutMs = 60_000, everyMs = 20): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
