//! `shoal analyze DIR`: Istio's `istioctl analyze` habit over a config directory, read
//! exactly as the directory registry reads it; the findings come from
//! `shoal_proto::analyze`.

use crate::output::{Format, OutputArgs};
use shoal_proto::analyze::{self, Message};
use shoal_proto::config::parse::{Location, ParseError};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status: no errors (warnings allowed).
const OK: u8 = 0;
/// Exit status: at least one Error-level finding.
const ERRORS: u8 = 1;
/// Exit status: the directory cannot be read.
const UNREADABLE: u8 = 2;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output: one line per finding (`Error [IST0101] (VirtualService ns/name \
    file:line) text`), or with -o json an array of {code, level, origin, message, file, \
    line}.\n\nExit status: 0 when no errors were found (warnings allowed), 1 when \
    some were, 2 when DIR cannot be read.\n\nCodes: Istio's where Istio has one (IST0101 \
    ReferencedResourceNotFound, IST0106 SchemaValidationError, IST0109, IST0110, IST0111, \
    IST0132, IST0133, IST0145, IST0173, IST0174); SHL0001 a kind Shoal does not implement \
    (an Error for a security.istio.io kind: what it would deny is let through), SHL0002 fields Shoal ignores."
)]
pub struct AnalyzeArgs {
    /// Directory of Kubernetes and Istio YAML, read recursively as `--config-dir` is.
    dir: PathBuf,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: &AnalyzeArgs) -> ExitCode {
    let files = match shoal_ingest::registry::read_dir(&args.dir) {
        Ok(files) => files,
        Err(error) => {
            eprintln!("shoal analyze: cannot read {}: {error}", args.dir.display());
            return ExitCode::from(UNREADABLE);
        }
    };
    let mut documents = Vec::new();
    // Documents of kinds Shoal does not read: said so (Info), never dropped silently.
    let mut ignored = Vec::new();
    for file in files {
        ignored.extend(file.ignored.into_iter().map(|i| Message {
            level: analyze::Level::Info,
            ..Message::new(
                analyze::codes::UNSUPPORTED_KIND,
                analyze::Origin {
                    object: i.object,
                    location: Some(i.location),
                },
                i.reason,
            )
        }));
        match file.documents {
            Ok(parsed) => documents.extend(parsed),
            Err(reason) => documents.push(Err(ParseError {
                location: Location {
                    source: file.path.display().to_string(),
                    line: 1,
                },
                object: "file".into(),
                reason: format!("unreadable: {reason}"),
                rejected: None,
            })),
        }
    }
    let mut messages = analyze::analyze(&documents);
    messages.extend(ignored);
    print(&messages, args);
    if messages.iter().any(Message::is_error) {
        ExitCode::from(ERRORS)
    } else {
        ExitCode::from(OK)
    }
}

fn print(messages: &[Message], args: &AnalyzeArgs) {
    match args.output.output {
        Format::Json => println!("{:#}", analyze::to_json(messages)),
        Format::Text if messages.is_empty() => eprintln!(
            "\u{2714} No validation issues found when analyzing {}.",
            args.dir.display()
        ),
        Format::Text => {
            for message in messages {
                println!("{message}");
            }
        }
    }
}
