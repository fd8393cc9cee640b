// The worker client.node.package compiles (tsc --strict) in a scratch
// project outside the repository against the packed @stagger/client
// tarball, and runs: it delivers DELIVERIES HTTP POSTs to URL through
// TARGET, each one a DeliveryLoop run, and prints where the package was
// loaded from, then each run's end ("end succeeded 1").
//   node worker.js TARGET URL [DELIVERIES]
import { DeliveryLoop, StaggerClient, endpointKeyFromUrl, outcomeFromHttpStatus, parseRetryAfter } from "@stagger/client";

async function main(): Promise<number> {
  const [target, url, n] = process.argv.slice(2);
  if (target === undefined || url === undefined) {
    console.error("usage: node worker.js TARGET URL [DELIVERIES]");
    return 2;
  }
  console.log("@stagger/client from", require.resolve("@stagger/client"));
  const client = await StaggerClient.create({ target, callDeadlineMs: 5000 });
  const loop = new DeliveryLoop(client);
  let ok = true;
  try {
    for (let i = 0; i < Number(n ?? 3); i++) {
      const r = await loop.run(endpointKeyFromUrl(url, 0), async (_attempt, signal) => {
        const res = await fetch(url, { method: "POST", body: JSON.stringify({ n: i }), signal });
        const ra = res.headers.get("retry-after");
        return { outcome: outcomeFromHttpStatus(res.status), retryAfterMs: ra === null ? undefined : parseRetryAfter(ra, Date.now()) };
      });
      console.log("end", r.end, r.attemptsMade);
      ok = ok && r.end === "succeeded";
    }
  } finally {
    client.close();
  }
  return ok ? 0 : 1;
}

main().then((code) => process.exit(code), (e: unknown) => {
  console.error(e);
  process.exit(1);
});
