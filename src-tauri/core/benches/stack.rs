//! Overhead of the whole resilience stack per call, without the network.
//!
//! `cargo bench -p product-extractor-core --bench stack`
//!
//! The wrapped call is a ready future (`Ok(1)`), so what is measured is everything
//! `ResilienceStack::call` adds around it: retry (backon), the circuit breaker's permit and
//! record (events, snapshot), the optional rate limiter (governor), the time limiter
//! (`tokio::time::timeout`) and the bulkhead (semaphore), plus the change notifications.
//! Requirement: median (p50) under 1 µs per call with the shipped settings.
//!
//! Variants:
//! - `baseline`: awaiting the op directly (the floor: criterion's async loop itself);
//! - `default`: the shipped settings (rate limiter off), nobody subscribed;
//! - `default_ui_subscribed`: the same with the panel's receivers alive (breaker snapshot watch,
//!   breaker events, stack changes), as in the app while its window is open;
//! - `rate_limiter`: the rate limiter on, with a limit no benchmark can reach;
//! - each on a current-thread and a multi-thread tokio runtime.

use std::convert::Infallible;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use pe_core::resilience::{RateLimiterConfig, ResilienceConfig, ResilienceStack, SlotPolicy, Verdict};
use tokio::runtime::Runtime;

async fn op() -> Result<u32, Infallible> {
    Ok(1)
}

fn verdict(_: &Infallible) -> Verdict {
    Verdict::Ignored
}

fn stack(config: ResilienceConfig) -> ResilienceStack {
    ResilienceStack::new("gemini", config).expect("valid config")
}

fn rate_limited() -> ResilienceConfig {
    ResilienceConfig {
        rate_limiter: RateLimiterConfig {
            enabled: true,
            limit_for_period: u32::MAX,
            limit_refresh_period: Duration::from_secs(1),
        },
        ..ResilienceConfig::default()
    }
}

fn runtimes() -> Vec<(&'static str, Runtime)> {
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    vec![("current_thread", current), ("multi_thread", multi)]
}

fn bench_stack(c: &mut Criterion) {
    for (flavor, rt) in runtimes() {
        let mut group = c.benchmark_group(format!("stack/{flavor}"));

        group.bench_function("baseline", |b| b.to_async(&rt).iter(op));

        // Built inside the runtime, as the app does (the breaker's timers need one).
        let default = rt.block_on(async { stack(ResilienceConfig::default()) });
        group.bench_function("default", |b| {
            b.to_async(&rt).iter(|| default.call(SlotPolicy::Configured, verdict, op));
        });

        let subscribed = rt.block_on(async { stack(ResilienceConfig::default()) });
        let _snapshots = subscribed.breaker().snapshot_watch();
        let _events = subscribed.breaker().subscribe_events();
        let _changes = subscribed.changes();
        group.bench_function("default_ui_subscribed", |b| {
            b.to_async(&rt).iter(|| subscribed.call(SlotPolicy::Configured, verdict, op));
        });

        let limited = rt.block_on(async { stack(rate_limited()) });
        group.bench_function("rate_limiter", |b| {
            b.to_async(&rt).iter(|| limited.call(SlotPolicy::Configured, verdict, op));
        });

        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench_stack
}
criterion_main!(benches);
