-- What a circuit breaker saved for the next run to start from (issue 26): a restart no longer
-- forgets that Gemini was failing. One row per breaker and desktop (`desktop` is '' on this
-- computer's own catalog; on a team catalog each desktop keeps its own breaker, as it keeps its
-- own bulkhead). `saved_json` is resilience::SavedBreaker: the state and when it was entered, the
-- window's outcomes, the refused calls and the recent events of the panel's timeline.
CREATE TABLE breaker_state (
    breaker    TEXT    NOT NULL,
    desktop    TEXT    NOT NULL,
    saved_json TEXT    NOT NULL CHECK (json_valid(saved_json)),
    saved_at   INTEGER NOT NULL,
    PRIMARY KEY (breaker, desktop)
) STRICT;
