-- pg 0012 = SQLite 0014: what a circuit breaker saved for the next run to start from (issue 26),
-- one row per breaker and desktop (`user@host`: each desktop keeps its own breaker).
CREATE TABLE breaker_state (
    breaker    TEXT   NOT NULL,
    desktop    TEXT   NOT NULL,
    saved_json JSON   NOT NULL,
    saved_at   BIGINT NOT NULL,
    PRIMARY KEY (breaker, desktop)
);
