//! Converting an Nsight Systems report (`.nsys-rep`) to SQLite with the
//! installed `nsys`. The export's result depends on the nsys version and the
//! flags, so both are part of an `Export` node's key ([`key_facet`]).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use super::error::TraceError;
use super::reader::TraceFile;

/// The flags of every export, in order (after `nsys`).
pub const EXPORT_ARGS: [&str; 5] = ["export", "--type", "sqlite", "--force-overwrite", "true"];

/// The program run when none is given: `nsys` from PATH.
pub const DEFAULT_PROGRAM: &str = "nsys";

/// The version `program --version` prints (`2024.5.1.113-245134619542v0`),
/// or `None` when it cannot be run.
pub fn version(program: &OsStr) -> Option<String> {
    let out = Command::new(program).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// The version token of `nsys --version` output
/// (`NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0`).
pub fn parse_version(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case("version"))?;
    words.next().map(str::to_string)
}

/// The key facet of an `Export` of a report: the nsys version and the export
/// flags, e.g. `nsys 2024.5.1.113 export --type sqlite …`; `nsys missing`
/// where it is not installed (the export itself then fails with a hint).
pub fn key_facet() -> String {
    // Probed once per process: `status` may judge thousands of Export nodes.
    static FACET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FACET
        .get_or_init(|| key_facet_for(OsStr::new(DEFAULT_PROGRAM)))
        .clone()
}

pub fn key_facet_for(program: &OsStr) -> String {
    match version(program) {
        Some(v) => format!("nsys {v} {}", EXPORT_ARGS.join(" ")),
        None => "nsys missing".to_string(),
    }
}

/// Exports the report `input` to the SQLite file `output` with `nsys`.
pub fn export_report(input: &Path, output: &Path) -> Result<(), TraceError> {
    export_report_with(OsStr::new(DEFAULT_PROGRAM), input, output)
}

/// Exports with the given nsys `program`: into a private folder beside
/// `output` first, then renamed into place once it reads as a trace.
pub fn export_report_with(program: &OsStr, input: &Path, output: &Path) -> Result<(), TraceError> {
    if version(program).is_none() {
        return Err(TraceError::NsysMissing {
            path: input.to_path_buf(),
        });
    }
    if let Err(e) = std::fs::metadata(input) {
        return Err(TraceError::io(input, e));
    }
    let dir = output.parent().unwrap_or(Path::new("."));
    let tmp_dir = dir.join(format!(".nsys-export-{}", std::process::id()));
    std::fs::create_dir_all(&tmp_dir).map_err(|e| TraceError::io(&tmp_dir, e))?;
    let tmp = tmp_dir.join("trace.sqlite");
    let result = run_export(program, input, &tmp).and_then(|()| {
        TraceFile::open(&tmp)?;
        std::fs::rename(&tmp, output).map_err(|e| TraceError::io(output, e))
    });
    let _ = std::fs::remove_dir_all(&tmp_dir);
    result
}

fn run_export(program: &OsStr, input: &Path, tmp: &Path) -> Result<(), TraceError> {
    let out = Command::new(program)
        .args(EXPORT_ARGS)
        .arg("--output")
        .arg(tmp)
        .arg(input)
        .output()
        .map_err(|e| TraceError::io(input, e))?;
    if out.status.success() && tmp.exists() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(TraceError::NsysFailed {
        path: input.to_path_buf(),
        status: out.status.to_string(),
        stderr: stderr.trim().chars().take(2000).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_the_word_after_version() {
        let text = "NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0\n";
        assert_eq!(
            parse_version(text).as_deref(),
            Some("2024.5.1.113-245134619542v0")
        );
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn a_missing_program_gives_an_install_hint() {
        let missing = OsStr::new("/nonexistent/nsys");
        assert_eq!(key_facet_for(missing), "nsys missing");
        let err = export_report_with(missing, Path::new("r.nsys-rep"), Path::new("o.sqlite"))
            .unwrap_err();
        assert!(matches!(err, TraceError::NsysMissing { .. }), "{err:?}");
    }

    /// A stand-in `nsys`: prints a version, and "exports" by copying `src`.
    fn fake_nsys(dir: &Path, src: &Path, fail: bool) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("nsys");
        let export = if fail {
            "echo 'cannot open report' >&2; exit 3".to_string()
        } else {
            format!(
                "while [ $# -gt 1 ]; do [ \"$1\" = --output ] && out=$2; shift; done; cp '{}' \"$out\"",
                src.display()
            )
        };
        let body = format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'NVIDIA Nsight Systems version 2099.1.1-abc'; exit 0; fi\n{export}\n"
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    #[test]
    fn export_runs_nsys_in_a_private_folder_and_renames() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("exported.sqlite");
        crate::trace::TraceWriter::create(&src)
            .unwrap()
            .finish()
            .unwrap();
        let nsys = fake_nsys(dir.path(), &src, false);
        let input = dir.path().join("report.nsys-rep");
        std::fs::write(&input, b"report").unwrap();
        let out_dir = dir.path().join("out");
        std::fs::create_dir(&out_dir).unwrap();
        let output = out_dir.join("trace.sqlite");
        export_report_with(nsys.as_os_str(), &input, &output).unwrap();
        TraceFile::open(&output).unwrap();
        let names: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            ["trace.sqlite"],
            "the private export folder is removed"
        );
        assert_eq!(
            key_facet_for(nsys.as_os_str()),
            "nsys 2099.1.1-abc export --type sqlite --force-overwrite true"
        );
    }

    #[test]
    fn a_failing_export_reports_nsys_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let nsys = fake_nsys(dir.path(), Path::new("/none"), true);
        let input = dir.path().join("report.nsys-rep");
        std::fs::write(&input, b"report").unwrap();
        let output = dir.path().join("trace.sqlite");
        let err = export_report_with(nsys.as_os_str(), &input, &output).unwrap_err();
        assert!(err.to_string().contains("cannot open report"), "{err}");
        assert!(!output.exists());
    }
}
