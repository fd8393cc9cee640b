// One endpoint's circuit breaker in the local fallback: the state machine
// of core/engine/circuit_breaker.cc on the default policy, for this
// process's view of the endpoint only.
//
//   CLOSED --(20 consecutive failures, or >= 50% failures over the last
//             10 s with >= 20 attempts)--> OPEN until T
//   OPEN --(read at or after T)--> HALF_OPEN
//   HALF_OPEN: at most 5 probes; slots not reported within 10 s are freed;
//             3 probe successes close it, a probe failure reopens it.
// Open time = min(1 s, 250 ms * 2^(trips-1)) * uniform(0.8, 1.2), trips
// counted since it last closed. Times in epoch ms. Not shared: one owner.
import { DEFAULT_POLICY, uniform, type Random } from "./policy";

export type BreakerState = "CLOSED" | "OPEN" | "HALF_OPEN";

const P = DEFAULT_POLICY.breaker;
const SLOTS = 5;
const SLOT_MS = P.windowMs / SLOTS;

export class Breaker {
  state: BreakerState = "CLOSED";
  // OPEN: when it half-opens. HALF_OPEN: the latest probe's admission.
  timeMs = 0;
  private trips = 0;
  private consecutiveFailures = 0;
  private probesInFlight = 0;
  private probeSuccesses = 0;
  // Attempts and failures per SLOT_MS slot, keyed by slot number.
  private window = new Map<number, { attempts: number; failures: number }>();

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
    this.count(nowMs, true);
    let attempts = 0;
    let failures = 0;
    for (const c of this.window.values()) {
      attempts += c.attempts;
      failures += c.failures;
    }
    const byCount = this.consecutiveFailures >= P.consecutiveFailures;
    const byRatio = attempts >= P.minThroughput && failures >= P.failureRatio * attempts;
    if (byCount || byRatio) this.trip(nowMs, random);
  }

  // The endpoint answered (a success, or a 4xx that shows it is up).
  onAnswer(nowMs: number): void {
    if (this.state === "OPEN") return;
    if (this.state === "HALF_OPEN") {
      if (this.probesInFlight > 0) this.probesInFlight--;
      if (++this.probeSuccesses >= P.closeAfterSuccesses) Object.assign(this, new Breaker());
      return;
    }
    this.consecutiveFailures = 0;
    this.count(nowMs, false);
  }

  // HALF_OPEN: is a probe slot free now? (Frees slots of probes that never
  // reported once the newest is probe_timeout old.)
  probeSlotFree(nowMs: number): boolean {
    if (this.probesInFlight > 0 && nowMs - this.timeMs >= P.probeTimeoutMs) {
      this.probesInFlight = 0;
    }
    const free = this.probesInFlight + this.probeSuccesses < P.halfOpenProbes;
    if (free) this.timeMs = nowMs;
    return free;
  }

  acquireProbe(): void {
    this.probesInFlight++;
  }

  private trip(nowMs: number, random: Random): void {
    this.trips = Math.min(this.trips + 1, 60);
    const nominal = Math.min(P.openMaxMs, P.openBaseMs * 2 ** (this.trips - 1));
    this.timeMs = nowMs + nominal * uniform(random, 0.8, 1.2);
    this.state = "OPEN";
    this.consecutiveFailures = 0;
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.window.clear();
  }

  private count(nowMs: number, failure: boolean): void {
    const slot = Math.floor(nowMs / SLOT_MS);
    for (const s of this.window.keys()) if (s <= slot - SLOTS) this.window.delete(s);
    const c = this.window.get(slot) ?? { attempts: 0, failures: 0 };
    c.attempts++;
    if (failure) c.failures++;
    this.window.set(slot, c);
  }
}
