//! `-o text|json`, as every `shoal` command that reports takes it.

/// How a command prints its report (each command's help says what each holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For a person: lines or a table.
    Text,
    /// For a program: one JSON document.
    Json,
}

/// The `-o/--output` flag.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}
