// One endpoint's circuit breaker in the local fallback: the state machine
// of core/engine/circuit_breaker.cc as docs/CLIENT_CONTRACT.md's fallback
// subset states it, for this process's view of the endpoint only.
//
//   CLOSED --(consecutiveFailures in a row, or failures >= failureRatio of
//             the attempts over the last windowMs -- five slots of
//             windowMs / 5 numbered from the epoch -- with at least
//             minThroughput of them)--> OPEN until T
//   OPEN --(read at or after T)--> HALF_OPEN
//   HALF_OPEN: at most halfOpenProbes probes; slots not reported within
//             probeTimeoutMs of the latest are freed; closeAfterSuccesses
//             answers close it, a failure reopens it. Every answer in
//             HALF_OPEN counts as a probe's (no probe tokens here).
// Open time = min(openMax, openBase * 2^(trips-1)) * (0.8 + 0.4 u), trips
// counted since it last closed. Times in epoch ms. Not shared: one owner.
import { uniform, type LocalPolicy, type Random } from "./policy";

export type BreakerState = "CLOSED" | "OPEN" | "HALF_OPEN";

const SLOTS = 5;

export class Breaker {
  state: BreakerState = "CLOSED";
  // OPEN: when it half-opens. HALF_OPEN: the latest probe's admission.
  timeMs = 0;
  private trips = 0;
  private consecutiveFailures = 0;
  private probesInFlight = 0;
  private probeSuccesses = 0;
  // Attempts and failures per slot, keyed by slot number.
  private window = new Map<number, { attempts: number; failures: number }>();

  constructor(private readonly p: LocalPolicy) {}

  // The time-driven OPEN -> HALF_OPEN transition.
  refresh(nowMs: number): void {
    if (this.state !== "OPEN" || nowMs < this.timeMs) return;
    this.state = "HALF_OPEN";
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.timeMs = nowMs;
  }

  onFailure(nowMs: number, random: Random): void {
    if (this.state === "OPEN") return; // sent before the trip
    if (this.state === "HALF_OPEN") return this.trip(nowMs, random);
    this.consecutiveFailures++;
    const { attempts, failures } = this.count(nowMs, true);
    const byCount = this.consecutiveFailures >= this.p.consecutiveFailures;
    const byRatio = attempts >= this.p.minThroughput && failures >= this.p.failureRatio * attempts;
    if (byCount || byRatio) this.trip(nowMs, random);
  }

  // The endpoint answered (a success, or a 4xx that shows it is up).
  onAnswer(nowMs: number): void {
    if (this.state === "OPEN") return;
    if (this.state === "HALF_OPEN") {
      if (this.probesInFlight > 0) this.probesInFlight--;
      if (++this.probeSuccesses >= this.p.closeAfterSuccesses) this.close();
      return;
    }
    this.consecutiveFailures = 0;
    this.count(nowMs, false);
  }

  // HALF_OPEN: is a probe slot free now? (Frees slots of probes that never
  // reported once the newest is probe_timeout old.)
  probeSlotFree(nowMs: number): boolean {
    if (this.probesInFlight > 0 && nowMs - this.timeMs >= this.p.probeTimeoutMs) {
      this.probesInFlight = 0;
    }
    const free = this.probesInFlight + this.probeSuccesses < this.p.halfOpenProbes;
    if (free) this.timeMs = nowMs;
    return free;
  }

  acquireProbe(): void {
    this.probesInFlight++;
  }

  private close(): void {
    this.state = "CLOSED";
    this.timeMs = 0;
    this.trips = 0;
    this.consecutiveFailures = 0;
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.window.clear();
  }

  private trip(nowMs: number, random: Random): void {
    this.trips = Math.min(this.trips + 1, 60);
    const nominal = Math.min(this.p.openMaxMs, this.p.openBaseMs * 2 ** (this.trips - 1));
    this.timeMs = nowMs + nominal * uniform(random, 0.8, 1.2);
    this.state = "OPEN";
    this.consecutiveFailures = 0;
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.window.clear();
  }

  // Counts one attempt in now's slot; the window's sums.
  private count(nowMs: number, failure: boolean): { attempts: number; failures: number } {
    const slot = Math.floor(nowMs / (this.p.windowMs / SLOTS));
    for (const s of this.window.keys()) if (s <= slot - SLOTS) this.window.delete(s);
    const c = this.window.get(slot) ?? { attempts: 0, failures: 0 };
    c.attempts++;
    if (failure) c.failures++;
    this.window.set(slot, c);
    let attempts = 0;
    let failures = 0;
    for (const w of this.window.values()) {
      attempts += w.attempts;
      failures += w.failures;
    }
    return { attempts, failures };
  }
}
