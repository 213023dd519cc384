//! Bulk-import benchmark: wall time against the bulkhead's bound, calls in flight at the fake, and
//! peak RSS as the queue grows.
//!
//! `cargo bench -p product-extractor-core --bench import` (both sizes; `-- 300` for one)
//!
//! N distinct 1600×1200 JPEGs (generated once into `target/tmp/import-bench/`) are imported from a
//! folder with the import's own settings (default intake, default `ImportOptions`) against the
//! fake Gemini answering after L = 500 ms, with K = 10 bulkhead slots. PASS requires, at N = 300:
//! wall time (from `enqueue` to settled, folder scan and hashing included) ≤ 1.05 × ⌈N/K⌉·L; at
//! every N: the fake's most calls in flight exactly K, every item ready; peak RSS under 300 MB,
//! and at N = 3000 at most 10 % above N = 300. (N = 3000 takes ⌈3000/10⌉·0.5 s = 150 s at least.)
//!
//! Every part runs in its own process so that each peak RSS is its own: the parent only
//! orchestrates (a child started with vfork/posix_spawn inherits the parent's peak as the floor of
//! its `ru_maxrss`, so the parent stays lean), the fake Gemini is `import --fake`, the import is
//! `import --import`, and the photos come from `import --generate`. The import's peak RSS is read
//! two ways: `wait4`'s rusage and the child's own `VmHWM` (Linux). Like the app, the import child
//! first applies `pe_core::memory::keep_large_buffers_out_of_the_heap`.
//!
//! `scripts/with-postgres cargo bench -p product-extractor-core --bench import -- team` (issue 13):
//! the team queue on the PostgreSQL server. N = 300 photos imported by one process into a fresh
//! server catalog (the reference), then by two processes at once into another, both queueing the
//! same folder, each with its own K = 10 bulkhead, one fake Gemini (L = 500 ms) for both. Each
//! wall time is from starting the import processes to the last one's exit. PASS requires the
//! two processes' wall ≤ 0.55 × the one's, exactly N calls at the fake, every item ready.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::{EnqueueOptions, ImportOptions, ImportQueue};
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};

const K: u32 = 10;
const LATENCY: Duration = Duration::from_millis(500);
const SIZES: [usize; 2] = [300, 3000];
const WIDTH: u32 = 1600;
const HEIGHT: u32 = 1200;
const QUALITY: u8 = 85;
const WALL_FACTOR: f64 = 1.05;
const RSS_LIMIT_MIB: f64 = 300.0;
const RSS_GROWTH_LIMIT: f64 = 1.10;
const KEY: &str = "bench-key";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--fake") => return fake(args[2].parse().unwrap()),
        Some("--import") => return import(Path::new(&args[2]), &args[3], args[4].parse().unwrap(), None),
        Some("--import-server") => {
            return import(Path::new(&args[2]), &args[3], args[4].parse().unwrap(), Some(args[5].as_str()));
        }
        Some("--generate") => {
            let size = (args[5].parse().unwrap(), args[6].parse().unwrap());
            return generate(Path::new(&args[2]), args[3].parse().unwrap(), args[4].parse().unwrap(), size);
        }
        _ => {}
    }
    // `cargo bench` passes `--bench`; numbers pick the sizes; another filter skips us.
    let words: Vec<&String> = args.iter().skip(1).filter(|a| !a.starts_with('-')).collect();
    if words.iter().any(|w| w.as_str() == "team") {
        std::process::exit(if team() { 0 } else { 1 });
    }
    let mut sizes: Vec<usize> = words.iter().filter_map(|w| w.parse().ok()).collect();
    if words.iter().any(|w| w.parse::<usize>().is_err() && !"import".contains(w.as_str())) {
        return;
    }
    if sizes.is_empty() {
        sizes = SIZES.to_vec();
    }
    std::process::exit(if orchestrate(&sizes) { 0 } else { 1 });
}

/// What one import child reports.
#[derive(Debug, Default)]
struct Report {
    wall_ms: f64,
    enqueue_ms: f64,
    ready: u64,
    failed: u64,
    vm_hwm_kib: u64,
    /// The import child's CPU time (user + system) from its start of work to its end.
    cpu_ms: f64,
    rusage_max_rss_kib: i64,
    max_in_flight: usize,
    calls: usize,
    /// Bytes the import child read through read(2) (`rchar`, page cache included) and from the
    /// disk (`read_bytes`), and the photos' total size: how often each file is read.
    rchar: u64,
    read_bytes: u64,
    photo_bytes: u64,
}

fn orchestrate(sizes: &[usize]) -> bool {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("import-bench");
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let photos = ensure_photos(&root, largest, (WIDTH, HEIGHT));
    println!(
        "import bench: K = {K}, L = {} ms, {WIDTH}×{HEIGHT} JPEGs (q{QUALITY}), {} CPUs",
        LATENCY.as_millis(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut reports = Vec::new();
    for &n in sizes {
        let folder = folder_of(&root, &photos, n);
        let report = run(&folder);
        let bound_ms = WALL_FACTOR * n.div_ceil(K as usize) as f64 * LATENCY.as_secs_f64() * 1000.0;
        println!(
            "N = {n:>5}: wall {:>8.0} ms (bound {:.0} ms: {}), enqueue {:.0} ms, {:.1} items/s, \
             max in flight {} (K = {K}), {} calls, ready {}, failed {}, peak RSS {:.1} MiB \
             (rusage {:.1} MiB)",
            report.wall_ms,
            bound_ms,
            verdict(report.wall_ms <= bound_ms),
            report.enqueue_ms,
            n as f64 / (report.wall_ms / 1000.0),
            report.max_in_flight,
            report.calls,
            report.ready,
            report.failed,
            report.vm_hwm_kib as f64 / 1024.0,
            report.rusage_max_rss_kib as f64 / 1024.0,
        );
        let per_photo = |bytes: u64| bytes as f64 / n as f64 / 1024.0;
        println!(
            "  read per photo: {:.0} KiB through read(2) (rchar), {:.0} KiB from the disk (read_bytes), \
             for {:.0} KiB photos: each file read {:.2}× (the SHA-256 at enqueue is reused, never computed again)",
            per_photo(report.rchar),
            per_photo(report.read_bytes),
            per_photo(report.photo_bytes),
            report.rchar as f64 / report.photo_bytes.max(1) as f64,
        );
        reports.push((n, bound_ms, report));
    }
    let mut pass = true;
    for (n, bound_ms, r) in &reports {
        let complete = r.ready == *n as u64 && r.failed == 0;
        let slots = r.max_in_flight == K as usize;
        let rss = (r.vm_hwm_kib as f64 / 1024.0) < RSS_LIMIT_MIB;
        let wall = *n != 300 || r.wall_ms <= *bound_ms;
        println!(
            "  N = {n}: all ready {}, max in flight = K {}, peak RSS < {RSS_LIMIT_MIB} MiB {}{}",
            verdict(complete),
            verdict(slots),
            verdict(rss),
            if *n == 300 {
                format!(", wall ≤ {WALL_FACTOR} × ⌈N/K⌉·L {}", verdict(wall))
            } else {
                String::new()
            }
        );
        pass &= complete && slots && rss && wall;
    }
    let small = reports.iter().find(|(n, ..)| *n == 300).map(|(_, _, r)| r.vm_hwm_kib);
    let large = reports.iter().find(|(n, ..)| *n == 3000).map(|(_, _, r)| r.vm_hwm_kib);
    if let (Some(small), Some(large)) = (small, large) {
        let growth = large as f64 / small as f64;
        let ok = growth <= RSS_GROWTH_LIMIT;
        println!("  peak RSS at N = 3000 / N = 300 = {growth:.3} (≤ {RSS_GROWTH_LIMIT}) {}", verdict(ok));
        pass &= ok;
    }
    println!("import bench: {}", verdict(pass));
    pass
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// The photos, generated once (two generator processes in parallel) and kept between runs.
fn ensure_photos(root: &Path, n: usize, (width, height): (u32, u32)) -> PathBuf {
    let dir = root.join(format!("photos-{width}x{height}-q{QUALITY}"));
    std::fs::create_dir_all(&dir).unwrap();
    let have = (0..n).take_while(|i| photo_path(&dir, *i).is_file()).count();
    if have < n {
        let started = Instant::now();
        let mid = have + (n - have) / 2;
        let children: Vec<_> = [(have, mid), (mid, n)]
            .iter()
            .map(|(from, to)| {
                Command::new(std::env::current_exe().unwrap())
                    .arg("--generate")
                    .arg(&dir)
                    .args([from.to_string(), to.to_string(), width.to_string(), height.to_string()])
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "generating photos failed");
        }
        println!("generated {} photos in {:.1} s into {}", n - have, started.elapsed().as_secs_f64(), dir.display());
    }
    dir
}

fn photo_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("p{i:05}.jpg"))
}

fn generate(dir: &Path, from: usize, to: usize, (width, height): (u32, u32)) {
    for i in from..to {
        let path = photo_path(dir, i);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, sample_jpeg(1_000_000 + i as u64, width, height, QUALITY)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
}

/// A folder holding exactly the first `n` photos (hard links).
fn folder_of(root: &Path, photos: &Path, n: usize) -> PathBuf {
    let folder = root.join(format!("n{n}"));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..n {
        let from = photo_path(photos, i);
        let to = folder.join(from.file_name().unwrap());
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    folder
}

/// One size: a fresh fake process, then the import process, measured.
fn run(folder: &Path) -> Report {
    let (mut fake, mut fake_out, base_url) = start_fake();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--import")
        .arg(folder)
        .args([base_url.trim(), &K.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a plain syscall on our own child; the kernel writes `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(rc, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the import child failed: {out}");
    std::mem::forget(child); // reaped above

    let mut report = parse(&out);
    report.rusage_max_rss_kib = ru.ru_maxrss;
    (report.max_in_flight, report.calls) = fake_stats(&mut fake, &mut fake_out);
    report
}

fn parse(line: &str) -> Report {
    let mut r = Report::default();
    for pair in line.split_whitespace() {
        let (key, value) = pair.split_once('=').unwrap();
        match key {
            "wall_ms" => r.wall_ms = value.parse().unwrap(),
            "enqueue_ms" => r.enqueue_ms = value.parse().unwrap(),
            "ready" => r.ready = value.parse().unwrap(),
            "failed" => r.failed = value.parse().unwrap(),
            "vm_hwm_kib" => r.vm_hwm_kib = value.parse().unwrap(),
            "cpu_ms" => r.cpu_ms = value.parse().unwrap(),
            "rchar" => r.rchar = value.parse().unwrap(),
            "read_bytes" => r.read_bytes = value.parse().unwrap(),
            "photo_bytes" => r.photo_bytes = value.parse().unwrap(),
            _ => {}
        }
    }
    r
}

/// The fake Gemini in its own process: prints its URL, answers, and on a line on stdin prints
/// "max_in_flight calls" and exits.
fn fake(latency_ms: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let options = FakeOptions {
            api_keys: vec![KEY.into()],
            latency: Duration::from_millis(latency_ms),
            ..FakeOptions::default()
        };
        let fake = FakeGemini::start(options).await.unwrap();
        println!("{}", fake.base_url());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await.unwrap().unwrap();
        println!("{} {}", fake.max_in_flight(), fake.generate_count());
        fake.shutdown().await;
    });
}

/// The team queue: N = 300 by one process on the server, then by two at once (see the header).
fn team() -> bool {
    const N: usize = 300;
    const TEAM_FACTOR: f64 = 0.55;
    if std::env::var("PRODUCT_EXTRACTOR_TEST_PG_URL").is_err() {
        eprintln!("import bench team: no server; run it under scripts/with-postgres");
        return false;
    }
    // Both desktops run on this one machine and share its cores, where a team's desktops have
    // their own: with the single-process bench's 1600×1200 photos, preparing 2 × 20 photos a
    // second needs more CPU than 2 cores have, and the bench would measure the cores, not the
    // queue. So the photos are small (640×480) unless `PE_TEAM_PHOTO=WxH` says otherwise.
    let size = std::env::var("PE_TEAM_PHOTO")
        .ok()
        .and_then(|v| v.split_once('x').and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?))))
        .unwrap_or((640, 480));
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("import-bench");
    let photos = ensure_photos(&root, N, size);
    let folder = folder_of(&root.join(format!("team-{}x{}", size.0, size.1)), &photos, N);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let database = |label: &str| rt.block_on(pe_core::catalog::server::testing::fresh_database(label));
    println!(
        "import bench, team queue: N = {N} photos of {}×{}, K = {K} per process, L = {} ms, one fake for all, {} CPUs",
        size.0,
        size.1,
        LATENCY.as_millis(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut results = Vec::new();
    for processes in [1usize, 2] {
        let server = database(&format!("team{processes}"));
        let (mut fake, mut fake_out, base_url) = start_fake();
        let mut children: Vec<_> = (0..processes)
            .map(|_| {
                let mut child = Command::new(std::env::current_exe().unwrap())
                    .arg("--import-server")
                    .arg(&folder)
                    .args([base_url.as_str(), &K.to_string(), &server])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut out = BufReader::new(child.stdout.take().unwrap());
                let mut line = String::new();
                out.read_line(&mut line).unwrap();
                assert_eq!(line.trim(), "ready", "an import child did not start");
                (child, out)
            })
            .collect();
        // Every process is connected, migrated and has its queue open: all go at once.
        let machine_before = machine_cpu_ms();
        let started = Instant::now();
        for (child, _) in &mut children {
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        }
        let reports: Vec<Report> = children
            .into_iter()
            .map(|(mut child, mut out)| {
                let mut text = String::new();
                out.read_to_string(&mut text).unwrap();
                assert!(child.wait().unwrap().success(), "an import child failed: {text}");
                parse(&text)
            })
            .collect();
        let start_to_exit_ms = started.elapsed().as_secs_f64() * 1000.0;
        let machine = machine_cpu_ms();
        let busy = (machine.0 - machine_before.0) / (machine.1 - machine_before.1).max(1.0);
        // Each process's own clock runs from its go to its last item settled.
        let wall_ms = reports.iter().map(|r| r.wall_ms).fold(0.0, f64::max);
        let (max_in_flight, calls) = fake_stats(&mut fake, &mut fake_out);
        let ready = reports.iter().map(|r| r.ready).max().unwrap_or(0);
        println!(
            "{processes} process{}: wall {wall_ms:>8.0} ms (from go to the last one settled; each: {}; to the last exit \
             {start_to_exit_ms:.0} ms), {calls} calls, max in flight {max_in_flight}, ready {ready}, peak RSS {} MiB, \
             CPU {} ms, machine busy {:.0} %",
            if processes == 1 { "" } else { "es" },
            reports.iter().map(|r| format!("{:.0} ms", r.wall_ms)).collect::<Vec<_>>().join(", "),
            reports.iter().map(|r| format!("{:.1}", r.vm_hwm_kib as f64 / 1024.0)).collect::<Vec<_>>().join(" / "),
            reports.iter().map(|r| format!("{:.0}", r.cpu_ms)).collect::<Vec<_>>().join(" / "),
            busy * 100.0,
        );
        results.push((wall_ms, calls, ready));
    }
    let (one, _, _) = results[0];
    let (two, calls, ready) = results[1];
    let fast = two <= TEAM_FACTOR * one;
    let once = calls == N && results[0].1 == N;
    let complete = ready == N as u64 && results[0].2 == N as u64;
    println!(
        "  two processes / one = {:.3} (≤ {TEAM_FACTOR}) {}, exactly {N} calls each run {}, all ready {}",
        two / one,
        verdict(fast),
        verdict(once),
        verdict(complete)
    );
    let pass = fast && once && complete;
    println!("import bench team: {}", verdict(pass));
    pass
}

/// A fake Gemini process (see [`fake`]) and its URL.
fn start_fake() -> (std::process::Child, BufReader<std::process::ChildStdout>, String) {
    let mut fake = Command::new(std::env::current_exe().unwrap())
        .args(["--fake", &LATENCY.as_millis().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fake_out = BufReader::new(fake.stdout.take().unwrap());
    let mut base_url = String::new();
    fake_out.read_line(&mut base_url).unwrap();
    (fake, fake_out, base_url.trim().to_string())
}

/// Ends a fake process; returns its most calls in flight and its calls.
fn fake_stats(fake: &mut std::process::Child, out: &mut BufReader<std::process::ChildStdout>) -> (usize, usize) {
    let mut stdin = fake.stdin.take().unwrap();
    writeln!(stdin, "stats").unwrap();
    let mut stats = String::new();
    out.read_line(&mut stats).unwrap();
    let mut numbers = stats.split_whitespace().map(|w| w.parse::<usize>().unwrap());
    let result = (numbers.next().unwrap(), numbers.next().unwrap());
    drop(stdin);
    fake.wait().unwrap();
    result
}

/// The import in its own process: a fresh catalog (or the team catalog at `server`), the folder
/// queued, worked until settled.
fn import(folder: &Path, base_url: &str, k: u32, server: Option<&str>) {
    // As the app does at startup (see `pe_core::memory`).
    pe_core::memory::keep_large_buffers_out_of_the_heap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let catalog = match server {
            None => Catalog::open(&Catalog::path_in(data.path())).unwrap(),
            Some(url) => {
                let url = pe_core::catalog::server::CatalogUrl::parse(url).unwrap();
                Catalog::open_url(&url, &|k: &str| std::env::var(k).ok()).await.unwrap()
            }
        };
        let mut resilience = ResilienceConfig::default();
        resilience.bulkhead.max_concurrent_calls = k;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        let client = GeminiClient::new(&GeminiConfig {
            base_url: base_url.into(),
            api_key: ApiKey::new(KEY),
            ..GeminiConfig::default()
        })
        .unwrap();
        let pipeline = Pipeline::new(client, stack, catalog, ImageConfig::default(), system_clock());
        let gemini = pipeline.gemini().clone();
        let queue = ImportQueue::open(pipeline, ImportOptions::default()).await.unwrap();
        // The model alias is looked up once per session, as the queue opens (the window opens it
        // at start): not part of importing N photos. `PE_COLD_LOOKUP` keeps it in the clock.
        if std::env::var("PE_COLD_LOOKUP").is_err() {
            gemini.model_family().await;
        }
        let photo_bytes: u64 = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        if server.is_some() {
            // The team bench starts every process's import at once (see `team`).
            println!("ready");
            std::io::stdout().flush().unwrap();
            tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await.unwrap().unwrap();
        }
        let io_before = proc_io();
        let cpu_before = cpu_ms();
        let started = Instant::now();
        queue.enqueue(vec![folder.to_path_buf()], EnqueueOptions::default()).await.unwrap();
        let enqueue_ms = started.elapsed().as_secs_f64() * 1000.0;
        let progress = queue.settled().await;
        let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        queue.shutdown().await;
        let io = proc_io();
        println!(
            "wall_ms={wall_ms:.1} enqueue_ms={enqueue_ms:.1} ready={} failed={} vm_hwm_kib={} cpu_ms={:.0} rchar={} read_bytes={} photo_bytes={photo_bytes}",
            progress.counts.ready,
            progress.counts.failed,
            vm_hwm_kib(),
            cpu_ms() - cpu_before,
            io.0 - io_before.0,
            io.1 - io_before.1,
        );
    });
}

/// This process's CPU time so far (user + system), ms.
fn cpu_ms() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage for getrusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

/// The machine's busy and total CPU time so far (all cores, from `/proc/stat`), ms; zeros
/// where it is not there.
fn machine_cpu_ms() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .map(|l| l.split_whitespace().filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    let tick_ms = 1000.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let total: f64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0.0) + fields.get(4).copied().unwrap_or(0.0);
    ((total - idle) * tick_ms, total * tick_ms)
}

/// This process's `rchar` and `read_bytes` from `/proc/self/io` (0 where it is not there).
fn proc_io() -> (u64, u64) {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field =
        |name: &str| io.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (field("rchar:"), field("read_bytes:"))
}

/// This process's peak resident set (`VmHWM`), KiB; 0 where /proc is not there.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
