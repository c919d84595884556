//! Every read and write of a tuner goes through a `Root`: "/" on a real machine, a directory
//! holding a fake /proc and /sys in tests. Paths given to it are absolute system paths.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
}

impl Root {
    pub fn new(base: impl Into<PathBuf>) -> Root {
        Root { base: base.into() }
    }

    pub fn system() -> Root {
        Root::new("/")
    }

    /// True for the real machine: only then do process limits come from getrlimit.
    pub fn is_system(&self) -> bool {
        self.base == Path::new("/")
    }

    /// Where the system path `abs` lies under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }

    /// The file's contents without the trailing newline sysfs and procfs add.
    pub fn read(&self, abs: &str) -> io::Result<String> {
        let text = fs::read_to_string(self.path(abs))?;
        Ok(text.trim_end_matches('\n').to_string())
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Names in a directory, sorted (numeric names by value) so reports are stable.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.path(abs)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => natural_key(a).cmp(&natural_key(b)),
        });
        names
    }

    /// The system path that `abs` resolves to once symlinks are followed (sysfs is made of
    /// them), or None when it does not exist.
    pub fn resolve(&self, abs: &str) -> Option<String> {
        let real = fs::canonicalize(self.path(abs)).ok()?;
        let base = fs::canonicalize(&self.base).ok()?;
        let inside = real.strip_prefix(&base).ok()?;
        Some(format!("/{}", inside.display()))
    }

    /// Writes `contents` as one write (sysfs takes a value per write). Files under /proc
    /// and /sys must already exist; elsewhere (/etc) the directory is created.
    pub fn write(&self, abs: &str, contents: &str) -> io::Result<()> {
        let path = self.path(abs);
        let kernel_file = abs.starts_with("/proc/") || abs.starts_with("/sys/");
        if !kernel_file {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
        }
        let mut options = fs::OpenOptions::new();
        options.write(true).truncate(true).create(!kernel_file);
        let mut file = options.open(&path)?;
        io::Write::write_all(&mut file, contents.as_bytes())
    }
}

/// "cpu10" sorts after "cpu9".
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, number) = name.split_at(name.len() - digits);
    (prefix.to_string(), number.parse().unwrap_or(0))
}
