//! Opening the app's state before the window exists. Opening is quick, except once after an
//! update whose catalog migration rewrites a large catalog (a 100,000-product catalog takes
//! seconds to minutes): then, after a moment, a small progress window says what is happening
//! instead of nothing on screen until the main window appears.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use pe_core::catalog::MigrationStep;
use pe_core::{ErrorCode, ErrorReport};

use crate::state::{AppState, Env, Paths};

/// How long opening may take before the progress window appears.
const MOMENT: Duration = Duration::from_millis(400);

enum Progress {
    Step(MigrationStep),
    Done(Result<AppState, ErrorReport>),
}

/// Opens the state on a thread of its own; if that takes longer than a moment, shows the
/// progress window on this (the main) thread until it is done.
pub fn open_state(paths: Paths, env: Env) -> Result<AppState, ErrorReport> {
    let (tx, rx) = mpsc::channel();
    let steps = tx.clone();
    std::thread::Builder::new()
        .name("open-catalog".into())
        .spawn(move || {
            let result = AppState::open_with_progress(paths, env, &mut |step| {
                let _ = steps.send(Progress::Step(step.clone()));
            });
            let _ = tx.send(Progress::Done(result));
        })
        .map_err(|e| ErrorReport::new(ErrorCode::Catalog, format!("cannot start opening the catalog: {e}")))?;

    let deadline = Instant::now() + MOMENT;
    let mut last = None;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Progress::Done(result)) => return result,
            Ok(Progress::Step(step)) => last = Some(step),
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return Err(stopped()),
        }
    }
    tracing::info!(step = ?last, "opening the catalog takes longer than a moment: showing its progress");
    window::wait(&rx, last)
}

fn stopped() -> ErrorReport {
    ErrorReport::new(ErrorCode::Catalog, "opening the catalog stopped unexpectedly; see the log for details")
}

/// What the progress window says for a step.
fn describe(step: Option<&MigrationStep>) -> String {
    match step {
        Some(step) if step.from > 0 => {
            format!("Updating the catalog from version {} to {}: {step}.", step.from, step.to)
        }
        Some(step) => format!("Creating the catalog: {step}."),
        None => "Opening the catalog…".into(),
    }
}

/// "1 min 05 s" for the time the window has been up.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

#[cfg(target_os = "linux")]
mod window {
    use super::*;
    use gtk::prelude::*;

    pub fn wait(rx: &Receiver<Progress>, mut last: Option<MigrationStep>) -> Result<AppState, ErrorReport> {
        if gtk::init().is_err() {
            // No display: nothing to show; wait as the CLI does.
            return super::wait_plain(rx);
        }
        let window = gtk::Window::new(gtk::WindowType::Toplevel);
        window.set_title("Product Extractor");
        window.set_default_size(460, -1);
        window.set_resizable(false);
        window.set_deletable(false);
        window.set_position(gtk::WindowPosition::Center);
        let column = gtk::Box::new(gtk::Orientation::Vertical, 10);
        column.set_border_width(24);
        let heading = gtk::Label::new(None);
        heading.set_markup("<b>Updating the catalog for this version</b>");
        heading.set_xalign(0.0);
        let detail = gtk::Label::new(Some(&describe(last.as_ref())));
        detail.set_xalign(0.0);
        detail.set_line_wrap(true);
        let bar = gtk::ProgressBar::new();
        let note = gtk::Label::new(Some(
            "This happens once after an update and can take a few minutes for a large catalog. \
             Each step keeps the catalog as it was until it is complete.",
        ));
        note.set_xalign(0.0);
        note.set_line_wrap(true);
        note.set_max_width_chars(56);
        let clock = gtk::Label::new(None);
        clock.set_xalign(0.0);
        for widget in [
            heading.upcast_ref::<gtk::Widget>(),
            detail.upcast_ref(),
            bar.upcast_ref(),
            note.upcast_ref(),
            clock.upcast_ref(),
        ] {
            column.pack_start(widget, false, false, 0);
        }
        window.add(&column);
        let show = |step: Option<&MigrationStep>| {
            detail.set_text(&describe(step));
            if let Some(step) = step {
                bar.set_fraction((step.index - 1) as f64 / step.count.max(1) as f64);
            }
        };
        show(last.as_ref());
        window.show_all();

        let shown = Instant::now();
        let result = loop {
            while gtk::events_pending() {
                gtk::main_iteration_do(false);
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Progress::Done(result)) => break result,
                Ok(Progress::Step(step)) => {
                    show(Some(&step));
                    last = Some(step);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break Err(stopped()),
            }
            clock.set_text(&format!("Working for {}", elapsed(shown.elapsed())));
        };
        tracing::info!(after = ?shown.elapsed(), step = ?last, "the catalog is open");
        window.hide();
        window.close();
        while gtk::events_pending() {
            gtk::main_iteration_do(false);
        }
        result
    }
}

#[cfg(not(target_os = "linux"))]
mod window {
    use super::*;

    pub fn wait(rx: &Receiver<Progress>, _last: Option<MigrationStep>) -> Result<AppState, ErrorReport> {
        super::wait_plain(rx)
    }
}

fn wait_plain(rx: &Receiver<Progress>) -> Result<AppState, ErrorReport> {
    loop {
        match rx.recv() {
            Ok(Progress::Done(result)) => return result,
            Ok(Progress::Step(_)) => {}
            Err(_) => return Err(stopped()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_it_does_and_for_how_long() {
        let step = MigrationStep { from: 2, to: 7, index: 3, count: 5, name: "0005_origin" };
        assert_eq!(describe(Some(&step)), "Updating the catalog from version 2 to 7: step 3 of 5 (0005_origin).");
        assert_eq!(
            describe(Some(&MigrationStep { from: 0, ..step })),
            "Creating the catalog: step 3 of 5 (0005_origin)."
        );
        assert_eq!(describe(None), "Opening the catalog…");
        assert_eq!(elapsed(Duration::from_secs(9)), "9 s");
        assert_eq!(elapsed(Duration::from_secs(65)), "1 min 05 s");
    }
}
