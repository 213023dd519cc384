import { describe, expect, it } from "vitest";
import type { ExtractionView } from "../bindings/ExtractionView";
import type { JobEvent } from "../bindings/JobEvent";
import { emptyProduct } from "./form";
import { nextReady, reduceJobs, stageText, totals, type JobAction, type JobCard } from "./jobs";

const ticket = (id: number) => ({ job_id: id, file: `/p/IMG_${id}.jpg`, file_name: `IMG_${id}.jpg` });
const ready = (id: number): ExtractionView => ({
  job_id: id,
  photo_id: 10 + id,
  attempt_id: 20 + id,
  file: `/p/IMG_${id}.jpg`,
  product: { ...emptyProduct(), name: `Product ${id}` },
  flags: [],
  usage: { prompt_tokens: 1, output_tokens: 1, thoughts_tokens: 0, total_tokens: 2 },
  raw_response: "{}",
  model: "gemini-test",
  latency_ms: 100,
  existing_product_id: null,
});
const ev = (event: JobEvent): JobAction => ({ type: "event", event });
const run = (actions: JobAction[], start: JobCard[] = []) => actions.reduce(reduceJobs, start);

describe("job reducer", () => {
  it("walks a job through its stages", () => {
    let cards = run([ev({ event: "queued", data: ticket(1) })]);
    expect(cards[0]).toMatchObject({ jobId: 1, fileName: "IMG_1.jpg", status: "queued" });
    expect(stageText(cards[0])).toBe("Waiting…");
    cards = run([{ type: "tickets", tickets: [ticket(1)] }], cards);
    expect(cards).toHaveLength(1);
    cards = run([ev({ event: "preparing", data: { job_id: 1 } })], cards);
    expect(stageText(cards[0])).toBe("Preparing…");
    cards = run(
      [
        ev({
          event: "prepared",
          data: {
            job_id: 1,
            thumbnail: "data:image/jpeg;base64,AA",
            width: 10,
            height: 10,
            original_width: 20,
            original_height: 20,
            sha256: "ab",
            estimated_tokens: 258,
          },
        }),
      ],
      cards,
    );
    expect(cards[0].prepared?.thumbnail).toContain("data:");
    cards = run([ev({ event: "extracting", data: { job_id: 1 } })], cards);
    expect(cards[0].status).toBe("extracting");
    cards = run([ev({ event: "ready", data: ready(1) })], cards);
    expect(cards[0].status).toBe("ready");
    expect(cards[0].extraction?.product.name).toBe("Product 1");
    cards = run([{ type: "saved", jobId: 1, productId: 7, product: { ...emptyProduct(), name: "Edited" } }], cards);
    expect(cards[0]).toMatchObject({ status: "saved", savedProductId: 7, savedName: "Edited" });
    expect(cards[0].extraction?.existing_product_id).toBe(7);
  });

  it("accepts events that arrive before the tickets", () => {
    const cards = run([
      ev({ event: "preparing", data: { job_id: 5 } }),
      { type: "tickets", tickets: [ticket(4), ticket(5)] },
    ]);
    expect(cards.map((c) => [c.jobId, c.fileName, c.status])).toEqual([
      [5, "IMG_5.jpg", "preparing"],
      [4, "IMG_4.jpg", "queued"],
    ]);
  });

  it("records failures and resets on retry", () => {
    let cards = run([
      { type: "tickets", tickets: [ticket(1)] },
      ev({ event: "failed", data: { job_id: 1, error: { code: "timeout", message: "timed out after 60s" } } }),
    ]);
    expect(cards[0].status).toBe("failed");
    expect(cards[0].error?.code).toBe("timeout");
    cards = run([{ type: "retry", jobId: 1 }], cards);
    expect(cards[0]).toMatchObject({ status: "preparing", error: null });
  });

  it("removes cards and finds the next ready one", () => {
    const cards = run([
      { type: "tickets", tickets: [ticket(1), ticket(2), ticket(3)] },
      ev({ event: "ready", data: ready(1) }),
      ev({ event: "ready", data: ready(3) }),
    ]);
    expect(nextReady(cards, 1)?.jobId).toBe(3);
    expect(nextReady(cards, 3)?.jobId).toBe(1);
    expect(totals(cards)).toEqual({ total: 3, working: 1, ready: 2, failed: 0, saved: 0 });
    const left = run([{ type: "remove", jobId: 3 }], cards);
    expect(nextReady(left, 1)).toBeNull();
  });

  it("keeps drafts per card", () => {
    const cards = run([
      { type: "tickets", tickets: [ticket(1)] },
      ev({ event: "ready", data: ready(1) }),
      { type: "draft", jobId: 1, product: { ...emptyProduct(), name: "Draft" }, flags: [] },
    ]);
    expect(cards[0].draft?.name).toBe("Draft");
  });
});
