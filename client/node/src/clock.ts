// Time for the client and the delivery loop, injectable so that tests run
// on a fake clock:
//   Clock.now()        epoch milliseconds;
//   Sleep(ms, signal)  resolves true once `ms` have passed, false as soon
//                      as `signal` fires (at once if it already has).
// realClock / realSleep are Date.now and setTimeout.
export interface Clock {
  now(): number;
}

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<boolean>;

export const realClock: Clock = { now: () => Date.now() };

export const realSleep: Sleep = (ms, signal) =>
  new Promise<boolean>((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
