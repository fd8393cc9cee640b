// Replica: one coordinator replica (or the stagger-agent) as StaggerClient
// sees it -- its channel and stubs, and whether calls go to it. Internal.
//
// Contract (client/coordinator_client.h's, for one replica):
//   * Up: calls go to it. A call that fails (anything but INVALID_ARGUMENT
//     or the caller's own cancellation) marks it down.
//   * Down: no call goes to it until recheckIntervalMs (on the client's
//     Clock) has passed since the last failure; then tryUse() lets one call
//     through as the probe. Its first answer marks it up.
//   * The channel is watched: it is asked to reconnect whenever it goes
//     idle, and when it becomes READY while the replica is down the next
//     call probes at once instead of waiting out the interval.
//   * With healthIntervalMs > 0 (several replicas) its gRPC health service
//     (service "stagger.v1.RetryCoordinator") is asked every interval;
//     NOT_SERVING (draining) makes serving false until SERVING again.
//     Health errors change nothing.
//   * close() stops the watch and the checks and closes the channel.
import {
  connectivityState,
  Metadata,
  type ChannelCredentials,
  type ChannelOptions,
} from "@grpc/grpc-js";

import type { Clock } from "./clock";
import { HealthCheckResponse_ServingStatus, HealthClient } from "./gen/grpc/health/v1/health";
import { RetryCoordinatorClient } from "./gen/stagger/v1/coordinator";

export interface ReplicaOptions {
  credentials: ChannelCredentials;
  channelOptions: ChannelOptions;
  recheckIntervalMs: number;
  healthIntervalMs: number; // 0: no health checks
  clock: Clock;
}

const WATCH_PERIOD_MS = 1000;

export class Replica {
  readonly stub: RetryCoordinatorClient;
  private readonly health: HealthClient;
  private upState = true;
  private nextProbeMs = -Infinity; // while down: the earliest probe
  serving = true;
  private closed = false;
  private lastState = connectivityState.IDLE;
  private healthTimer: NodeJS.Timeout | undefined;
  private healthInFlight = false;

  constructor(
    readonly name: string,
    readonly target: string,
    private readonly opts: ReplicaOptions,
  ) {
    this.stub = new RetryCoordinatorClient(target, opts.credentials, opts.channelOptions);
    this.health = new HealthClient(target, opts.credentials, {
      ...opts.channelOptions,
      channelOverride: this.stub.getChannel(),
    });
    this.watch();
    if (opts.healthIntervalMs > 0) {
      this.healthTimer = setInterval(() => this.checkHealth(), opts.healthIntervalMs);
      this.healthTimer.unref();
      this.checkHealth();
    }
  }

  get up(): boolean {
    return this.upState;
  }

  // Whether a call should go here now: up, or down with the recheck
  // interval over (then this call is the probe).
  tryUse(): boolean {
    if (this.upState) return true;
    const now = this.opts.clock.now();
    if (now < this.nextProbeMs) return false;
    this.nextProbeMs = now + this.opts.recheckIntervalMs;
    return true;
  }

  markUp(): void {
    this.upState = true;
  }

  markDown(): void {
    this.nextProbeMs = this.opts.clock.now() + this.opts.recheckIntervalMs;
    this.upState = false;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.healthTimer);
    this.stub.close();
  }

  // Channel READY while down: let the next call probe at once.
  private onReady(): void {
    if (!this.upState) this.nextProbeMs = -Infinity;
  }

  private watch(): void {
    if (this.closed) return;
    const channel = this.stub.getChannel();
    const state = channel.getConnectivityState(true); // idle: reconnect
    if (state === connectivityState.SHUTDOWN) return;
    if (state === connectivityState.READY && this.lastState !== connectivityState.READY) {
      this.onReady();
    }
    this.lastState = state;
    channel.watchConnectivityState(state, Date.now() + WATCH_PERIOD_MS, () => this.watch());
  }

  private checkHealth(): void {
    if (this.closed || this.healthInFlight) return;
    this.healthInFlight = true;
    const deadline = Date.now() + Math.max(this.opts.healthIntervalMs, 100);
    this.health.check(
      { service: "stagger.v1.RetryCoordinator" },
      new Metadata(),
      { deadline },
      (err, resp) => {
        this.healthInFlight = false;
        if (err !== null || this.closed) return;
        const serving = resp.status === HealthCheckResponse_ServingStatus.SERVING;
        const was = this.serving;
        this.serving = serving;
        if (serving && !was) this.onReady();
      },
    );
  }
}
