// A fake stagger.v1.RetryCoordinator (and grpc.health.v1.Health) on a
// loopback port or a Unix socket, for the client's tests: it records every
// request and answers from `answer` (a decision, a gRPC error, or a hold
// before either). Stop it with stop().
import { Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";

import {
  HealthCheckResponse_ServingStatus,
  HealthService,
  type HealthServer,
} from "../../../client/node/src/gen/grpc/health/v1/health";
import {
  Reason,
  RetryCoordinatorService,
  Verdict,
  type AdmitRequest,
  type Decision,
  type ReportRequest,
  type RetryCoordinatorServer,
} from "../../../client/node/src/gen/stagger/v1/coordinator";

export type Answer =
  | { decision?: Decision; error?: { code: status; details: string }; holdMs?: number }
  | undefined;

export const PROCEED: Decision = {
  verdict: Verdict.PROCEED,
  reason: Reason.ADMITTED,
  attempt: 1,
  admission: 0n,
  waitSupported: false,
};

export class FakeCoordinator {
  readonly admits: AdmitRequest[] = [];
  readonly reports: ReportRequest[] = [];
  readonly batches: number[] = []; // sizes of the batches received
  answer: (call: "admit" | "report", req: AdmitRequest | ReportRequest) => Answer = () => ({ decision: PROCEED });
  serving = HealthCheckResponse_ServingStatus.SERVING;
  private server = new Server();
  private holds = new Set<NodeJS.Timeout>();
  target = "";

  // `address`: "127.0.0.1:0" (a free port) or "unix:/path".
  async start(address = "127.0.0.1:0"): Promise<this> {
    const reply = (call: "admit" | "report", req: AdmitRequest | ReportRequest, cb: (e: ServiceError | null, r?: { decision?: Decision }) => void) => {
      (call === "admit" ? this.admits : this.reports).push(req as never);
      const a = this.answer(call, req) ?? {};
      const send = () => {
        if (a.error) cb(Object.assign(new Error(a.error.details), { code: a.error.code, details: a.error.details, metadata: undefined as never }));
        else cb(null, a.decision === undefined ? {} : { decision: a.decision });
      };
      if (!a.holdMs) return send();
      const t = setTimeout(() => {
        this.holds.delete(t);
        send();
      }, a.holdMs);
      this.holds.add(t);
    };
    // A batch: every item recorded and answered as its single call would be.
    const batch = (call: "admit" | "report", items: (AdmitRequest | ReportRequest)[], cb: (e: ServiceError | null, r?: { decisions: Decision[] }) => void) => {
      this.batches.push(items.length);
      const decisions = items.map((item) => {
        (call === "admit" ? this.admits : this.reports).push(item as never);
        return this.answer(call, item)?.decision ?? PROCEED;
      });
      cb(null, { decisions });
    };
    const unimplemented = { code: status.UNIMPLEMENTED, details: "fake", name: "", message: "", metadata: undefined as never };
    const coordinator: RetryCoordinatorServer = {
      admit: (call, cb) => reply("admit", call.request, cb),
      report: (call, cb) => reply("report", call.request, cb),
      admitBatch: (call, cb) => batch("admit", call.request.items, cb),
      reportBatch: (call, cb) => batch("report", call.request.items, cb),
      getEndpoint: (_c, cb) => cb(unimplemented),
      listEndpoints: (_c, cb) => cb(unimplemented),
    };
    const health: HealthServer = {
      check: (_call, cb) => cb(null, { status: this.serving }),
      watch: (call) => call.end(),
    };
    this.server.addService(RetryCoordinatorService, coordinator);
    this.server.addService(HealthService, health);
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(address, ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    this.target = address.startsWith("unix:") ? address : `127.0.0.1:${port}`;
    return this;
  }

  stop(): void {
    for (const t of this.holds) clearTimeout(t);
    this.server.forceShutdown();
  }
}
