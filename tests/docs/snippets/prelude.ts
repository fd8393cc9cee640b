// What the TypeScript snippets leave to the worker (readme_snippet_test.py
// puts this after each one): a delivery from its queue and two exits.
interface Job {
  url: string;
  body: string;
  nextAttempt: number; // where a parked delivery resumes (1 for a new one)
  firstAttemptTimeMs?: number; // when its first attempt went
}
declare function park(job: Job, delayMs: number): void; // redeliver later
declare function deadLetter(job: Job, why: string): void;
