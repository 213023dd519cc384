-- 0006: what every attempt cost.
--
-- `cached_tokens` is the part of `prompt_tokens` Gemini served from its cache (billed at the
-- cached-input price). `model_version` is the model that answered, as the response named it (an
-- alias such as gemini-flash-latest is billed as the model it points to). `cost_nanos` is the
-- attempt's price in billionths of a dollar, computed with the price table in force when it was
-- recorded (`pricing`); NULL when the model had no price or the call returned no usage, so a
-- total never pretends to know it. `batch` is 1 for a call billed at the Batch API's discount.
-- Attempts from before this version keep NULL costs: their prices were never recorded.

ALTER TABLE attempts ADD COLUMN cached_tokens INTEGER CHECK (cached_tokens >= 0);
ALTER TABLE attempts ADD COLUMN model_version TEXT;
ALTER TABLE attempts ADD COLUMN cost_nanos INTEGER CHECK (cost_nanos >= 0);
ALTER TABLE attempts ADD COLUMN batch INTEGER NOT NULL DEFAULT 0 CHECK (batch IN (0, 1));

-- Spend per day and today's spend (the daily budget, asked before each call): a range scan that
-- reads the cost from the index.
CREATE INDEX attempts_by_start ON attempts (started_at, cost_nanos);
