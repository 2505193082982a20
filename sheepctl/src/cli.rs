//! Every flag and subcommand of `sheepctl`, declared once with clap's derive API.
//! Nothing here talks to the server: [`crate::settings`] turns these raw flags into
//! validated settings, and `crate::commands` runs them.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use shared::api::{API_ENV, CA_ENV, TOKEN_ENV};
use shared::image::REGISTRY_ENV;

#[derive(Debug, Parser)]
#[command(
    name = "sheepctl",
    version,
    about = "Drive a Shepherd cluster from the command line, the way kubectl drives Kubernetes.",
    after_help = "Examples:\n  sheepctl apply -f examples/pod.json\n  sheepctl get pods -o wide\n  sheepctl wait --for=Running pod/web-server --timeout=30s\n  sheepctl describe pod web-server\n  sheepctl events -w"
)]
pub struct Cli {
    /// Address of the Shepherd API server: host:port, http://host:port or https://host:port [default: 127.0.0.1:9876];
    /// several servers of one cluster separated by commas, tried in turn
    #[arg(long, global = true, env = API_ENV, value_name = "URL")]
    pub server: Option<String>,

    /// PEM file of the certificate authority an https server's certificate must be signed by
    /// (`shepherd --tls-self-signed` makes tls/ca.crt in its data directory)
    #[arg(long, global = true, env = CA_ENV, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,

    /// Bearer token, when the server requires one
    #[arg(long, global = true, env = TOKEN_ENV, hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,

    /// Namespace to work in [default: default]
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// List across every namespace
    #[arg(short = 'A', long = "all-namespaces", global = true)]
    pub all_namespaces: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update objects from JSON or YAML manifests
    Apply(ApplyArgs),
    /// List objects, or show one
    Get(GetArgs),
    /// Explain one object: spec, conditions, scheduling decision and events
    Describe(DescribeArgs),
    /// Delete objects by name or by manifest
    Delete(DeleteArgs),
    /// Set the number of replicas of a deployment
    Scale(ScaleArgs),
    /// Follow, list, undo, pause, resume or restart a deployment's rollout
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// Change a deployment's pod template
    #[command(subcommand)]
    Set(SetCommand),
    /// Print a container's output
    Logs(LogsArgs),
    /// Run a command in a pod's container: sheepctl exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]
    Exec(ExecArgs),
    /// Copy files and directories to and from a pod's container: sheepctl cp notes.txt web:/tmp/ (tar over exec)
    Cp(CpArgs),
    /// Forward local ports on 127.0.0.1 to a pod's ports, or to a service's pod
    PortForward(PortForwardArgs),
    /// List events, oldest first
    Events(EventsArgs),
    /// List nodes with their readiness and capacity
    Nodes(NodesArgs),
    /// Show what pods or nodes use now: CPU and memory, measured by the nodes' agents
    #[command(subcommand)]
    Top(TopCommand),
    /// Mark a node unschedulable: its pods stay, new pods go elsewhere
    Cordon(NodeArgs),
    /// Make a cordoned node schedulable again
    Uncordon(NodeArgs),
    /// Show what the server reports about itself, which server leads and which answer
    #[command(visible_alias = "cluster-info")]
    Info(InfoArgs),
    /// Block until objects reach a state, or until a timeout
    Wait(WaitArgs),
    /// Print a shell completion script
    Completion(CompletionArgs),
    /// Print a kubeconfig for this server, or save it: KUBECONFIG=$(sheepctl kubeconfig --save) kubectl get pods
    Kubeconfig(KubeconfigArgs),
    /// Move images into the cluster's registry, for every node to pull
    #[command(subcommand)]
    Image(ImageCommand),
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Tag a local image as REGISTRY/NAME:TAG and push it there through the local Docker
    /// engine; pods then name that reference
    Push(ImagePushArgs),
}

#[derive(Debug, Args)]
pub struct ImagePushArgs {
    /// A local image: NAME[:TAG]
    pub name: String,

    /// The registry (`shepherd registry`): HOST:PORT
    #[arg(long, env = REGISTRY_ENV, default_value = shared::image::DEFAULT_REGISTRY, value_name = "HOST:PORT")]
    pub registry: String,

    /// The user to sign in as, with --token as password (a node token's user is its node's name)
    #[arg(long, default_value = shared::image::ADMIN_USER, value_name = "USER")]
    pub registry_user: String,
}

#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// The name of the cluster, user and context in the file; with several servers, the
    /// first server's (the current context), then NAME-2, NAME-3, … one per server
    #[arg(long, default_value = "shepherd", value_name = "NAME")]
    pub context: String,

    /// Write it to a file readable only by you and print the file's path
    /// [default: $XDG_CONFIG_HOME/shepherd/kubeconfig, else ~/.config/shepherd/kubeconfig]
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub save: Option<Option<PathBuf>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Extra columns: the pod IP and, for a Pending pod, why
    Wide,
    Json,
    Yaml,
    /// kind/name, one per line
    Name,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A manifest file, a directory of them (.json, .yaml, .yml), or - for standard input
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-", required = true)]
    pub files: Vec<PathBuf>,

    /// Wait until pods are Running and deployments available
    #[arg(long)]
    pub wait: bool,

    /// How long --wait waits, e.g. 30s, 2m
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    pub timeout: String,
}

/// How many objects a page of a printed list holds: kubectl's default chunk size.
pub const CHUNK_SIZE: usize = 500;

#[derive(Debug, Args)]
pub struct GetArgs {
    /// pods (po), deployments (deploy), services (svc), nodes (no), events (ev), namespaces (ns); or KIND/NAME
    #[arg(value_name = "KIND")]
    pub kind: String,

    /// Only this object
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<OutputFormat>,

    /// Label selector, e.g. app=web,tier!=db or 'env in (prod,staging)'
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// Field selector, e.g. status.phase=Running,spec.node_name=node-1 (docs/api.md lists the fields)
    #[arg(long = "field-selector", value_name = "SELECTOR")]
    pub field_selector: Option<String>,

    /// After listing, keep printing changes as they happen
    #[arg(short = 'w', long)]
    pub watch: bool,

    /// List in pages of this many objects, printing each as it arrives (0: one list), as kubectl's --chunk-size
    #[arg(long = "chunk-size", value_name = "N", default_value_t = CHUNK_SIZE)]
    pub chunk_size: usize,
}

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// KIND NAME, or KIND/NAME
    #[arg(value_name = "KIND", required = true, num_args = 1..=2)]
    pub target: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// KIND NAME..., or KIND/NAME...
    #[arg(value_name = "TARGET", required_unless_present = "files", conflicts_with = "files")]
    pub target: Vec<String>,

    /// Delete the objects these manifests describe
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
    pub files: Vec<PathBuf>,

    /// Succeed when an object is already gone
    #[arg(long)]
    pub ignore_not_found: bool,

    /// Seconds a pod's containers get to stop before they are killed; -1 uses the pod's own
    /// (spec.termination_grace_period_seconds, else 30). 0 needs --force
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, value_name = "SECONDS")]
    pub grace_period: i64,

    /// Remove pods from the API at once, without waiting for their node to confirm that the
    /// containers stopped (the same as --grace-period=0, which needs it)
    #[arg(long)]
    pub force: bool,

    /// Wait until the objects are gone; --wait=false returns as soon as the server took the
    /// deletion (a pod may still be Terminating)
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub wait: bool,

    /// How long --wait waits, e.g. 30s, 2m; 0s (the default, as kubectl) means a week
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// deployment/NAME, or deployment NAME
    #[arg(value_name = "DEPLOYMENT", required = true, num_args = 1..=2)]
    pub target: Vec<String>,

    /// The desired number of pods
    #[arg(long, value_name = "N")]
    pub replicas: i32,
}

#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Follow the rollout until it is done; exit 1 when it exceeds its progress deadline
    Status(RolloutStatusArgs),
    /// List the revisions, or show one's pod template
    History(RolloutHistoryArgs),
    /// Roll back to the previous revision, or to --to-revision
    Undo(RolloutUndoArgs),
    /// Stop rolling out template changes until resumed
    Pause(DeploymentArgs),
    /// Roll out again what changed while paused
    Resume(DeploymentArgs),
    /// Replace every pod, by stamping the template with the time
    Restart(DeploymentArgs),
}

#[derive(Debug, Args)]
pub struct DeploymentArgs {
    /// deployment/NAME, or deployment NAME
    #[arg(value_name = "DEPLOYMENT", required = true, num_args = 1..=2)]
    pub target: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RolloutStatusArgs {
    #[command(flatten)]
    pub deployment: DeploymentArgs,

    /// Keep following until the rollout is done; --watch=false prints where it stands once
    #[arg(short = 'w', long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub watch: bool,

    /// Give up after this long, e.g. 30s, 2m; 0s (the default, as kubectl) means never
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct RolloutHistoryArgs {
    #[command(flatten)]
    pub deployment: DeploymentArgs,

    /// Show this revision's pod template
    #[arg(long, value_name = "N")]
    pub revision: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RolloutUndoArgs {
    #[command(flatten)]
    pub deployment: DeploymentArgs,

    /// The revision to go back to; 0 (the default) is the previous one
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub to_revision: u64,
}

#[derive(Debug, Subcommand)]
pub enum SetCommand {
    /// Set containers' images: deployment/NAME CONTAINER=IMAGE..., or *=IMAGE for every container
    Image(SetImageArgs),
}

#[derive(Debug, Args)]
pub struct SetImageArgs {
    /// deployment/NAME (or deployment NAME), then CONTAINER=IMAGE...
    #[arg(value_name = "DEPLOYMENT CONTAINER=IMAGE", required = true, num_args = 2..)]
    pub words: Vec<String>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The pod, as NAME or pod/NAME
    #[arg(value_name = "POD")]
    pub pod: String,

    /// Which container, when the pod has several
    #[arg(short = 'c', long, value_name = "CONTAINER")]
    pub container: Option<String>,

    /// Keep streaming new output
    #[arg(short = 'f', long)]
    pub follow: bool,

    /// Only the last N lines
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,

    /// Each line after the time it was written (RFC 3339)
    #[arg(long)]
    pub timestamps: bool,

    /// Only what was written in this last span, e.g. 5s, 2m, 1h
    #[arg(long, value_name = "DURATION", conflicts_with = "since_time")]
    pub since: Option<String>,

    /// Only what was written from this time on (RFC 3339)
    #[arg(long = "since-time", value_name = "TIME")]
    pub since_time: Option<String>,

    /// The container's previous run, before its last restart
    #[arg(short = 'p', long)]
    pub previous: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The pod, as NAME or pod/NAME
    #[arg(value_name = "POD")]
    pub pod: String,

    /// Which container [default: the kubectl.kubernetes.io/default-container annotation's, else the first]
    #[arg(short = 'c', long, value_name = "CONTAINER")]
    pub container: Option<String>,

    /// Pass standard input to the command, to its end
    #[arg(short = 'i', long)]
    pub stdin: bool,

    /// Give the command a terminal (with -i: this one, in raw mode)
    #[arg(short = 't', long)]
    pub tty: bool,

    /// The command and its arguments, after --
    #[arg(value_name = "COMMAND", last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CpArgs {
    /// A local path, or [NAMESPACE/]POD:PATH
    #[arg(value_name = "SRC")]
    pub source: String,

    /// A local path, or [NAMESPACE/]POD:PATH
    #[arg(value_name = "DEST")]
    pub destination: String,

    /// Which container [default: as exec]
    #[arg(short = 'c', long, value_name = "CONTAINER")]
    pub container: Option<String>,
}

#[derive(Debug, Args)]
pub struct PortForwardArgs {
    /// The pod, as NAME or pod/NAME, or a service as svc/NAME (forwarded to one of its pods)
    #[arg(value_name = "TYPE/NAME")]
    pub target: String,

    /// [LOCAL:]REMOTE, e.g. 8080:80; REMOTE may be a named port; LOCAL empty (:80) picks a free one
    #[arg(value_name = "[LOCAL:]REMOTE", required = true, num_args = 1..)]
    pub ports: Vec<String>,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep printing new events as they happen
    #[arg(short = 'w', long)]
    pub watch: bool,

    /// Only the events of this object, e.g. pod/web-server: of the object that has that name
    /// now (by its uid), not of earlier ones of the same name
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub for_object: Option<String>,

    /// With --for: the events of every object that ever had that name
    #[arg(long, requires = "for_object")]
    pub all_instances: bool,

    /// Only events of these types, e.g. Warning or Normal,Warning
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    pub types: Vec<String>,

    /// Field selector, e.g. reason=FailedScheduling,source=scheduler (docs/api.md lists the fields)
    #[arg(long = "field-selector", value_name = "SELECTOR")]
    pub field_selector: Option<String>,

    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
}

#[derive(Debug, Args)]
pub struct NodesArgs {
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<OutputFormat>,

    /// Label selector over node labels
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TopCommand {
    /// The running pods' usage, in the namespace (-n) or every one (-A)
    #[command(visible_aliases = ["pod", "po"])]
    Pods(TopPodsArgs),
    /// The nodes' usage, the sum of their pods', against what they can give
    #[command(visible_aliases = ["node", "no"])]
    Nodes(TopNodesArgs),
}

#[derive(Debug, Args)]
pub struct TopPodsArgs {
    /// Only this pod
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    /// Label selector over pod labels
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// One line per container
    #[arg(long)]
    pub containers: bool,
}

#[derive(Debug, Args)]
pub struct TopNodesArgs {
    /// Only this node
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    /// Label selector over node labels
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// The node, as NAME or node/NAME
    #[arg(value_name = "NODE")]
    pub node: String,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Conditions:\n  --for=Running              pods Running, deployments available, nodes Ready, services with endpoints\n  --for=phase=Succeeded      a pod phase\n  --for=condition=PodScheduled[=True|False]\n  --for=delete               the object is gone\n\nExamples:\n  sheepctl wait --for=Running pod/web-server\n  sheepctl wait --for=Running pods -l app=web --timeout=1m"
)]
pub struct WaitArgs {
    /// KIND/NAME..., or KIND NAME..., or KIND with -l
    #[arg(value_name = "TARGET", required = true)]
    pub target: Vec<String>,

    /// Wait for every object of KIND that matches this label selector now, e.g. -l app=web
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// The state to wait for
    #[arg(long = "for", value_name = "CONDITION", required = true)]
    pub condition: String,

    /// Give up after this long, e.g. 30s, 2m, 500ms
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["sheepctl", "get", "pods", "-n", "prod", "--server", "h:1", "-o", "wide"]).unwrap();
        assert_eq!(cli.namespace.as_deref(), Some("prod"));
        assert_eq!(cli.server.as_deref(), Some("h:1"));
        let Command::Get(get) = cli.command else { panic!("expected get") };
        assert_eq!(get.output, Some(OutputFormat::Wide));
    }

    #[test]
    fn rollout_flags_default_as_kubectl() {
        let cli = Cli::try_parse_from(["sheepctl", "rollout", "status", "deploy/shop"]).unwrap();
        let Command::Rollout(RolloutCommand::Status(args)) = cli.command else { panic!("expected rollout status") };
        assert_eq!((args.watch, args.timeout.as_str()), (true, "0s"));
        let cli = Cli::try_parse_from(["sheepctl", "rollout", "status", "deployment", "shop", "--watch=false"]).unwrap();
        let Command::Rollout(RolloutCommand::Status(args)) = cli.command else { panic!("expected rollout status") };
        assert_eq!((args.deployment.target.len(), args.watch), (2, false));
        let cli = Cli::try_parse_from(["sheepctl", "rollout", "undo", "deploy/shop"]).unwrap();
        let Command::Rollout(RolloutCommand::Undo(args)) = cli.command else { panic!("expected rollout undo") };
        assert_eq!(args.to_revision, 0);
        assert!(Cli::try_parse_from(["sheepctl", "rollout", "undo", "deploy/shop", "--to-revision=-1"]).is_err());
        assert!(Cli::try_parse_from(["sheepctl", "set", "image", "deploy/shop"]).is_err(), "an image is required");
    }

    #[test]
    fn wait_requires_a_condition() {
        let err = Cli::try_parse_from(["sheepctl", "wait", "pod/a"]).unwrap_err();
        assert!(err.to_string().contains("--for"), "{err}");
    }

    #[test]
    fn delete_takes_names_or_files_but_not_both() {
        assert!(Cli::try_parse_from(["sheepctl", "delete", "pod", "a"]).is_ok());
        assert!(Cli::try_parse_from(["sheepctl", "delete", "-f", "x.json"]).is_ok());
        assert!(Cli::try_parse_from(["sheepctl", "delete", "pod/a", "-f", "x.json"]).is_err());
        assert!(Cli::try_parse_from(["sheepctl", "delete"]).is_err());
    }

    fn delete_args(args: &[&str]) -> DeleteArgs {
        let cli = Cli::try_parse_from(["sheepctl", "delete"].iter().chain(args)).unwrap();
        let Command::Delete(delete) = cli.command else { panic!("expected delete") };
        delete
    }

    #[test]
    fn delete_waits_with_the_pods_own_grace_by_default() {
        let args = delete_args(&["pod", "a"]);
        assert_eq!((args.grace_period, args.force, args.wait, args.timeout.as_str()), (-1, false, true, "0s"));
        let args = delete_args(&["pod", "a", "--grace-period=5", "--wait=false", "--timeout", "1m"]);
        assert_eq!((args.grace_period, args.wait, args.timeout.as_str()), (5, false, "1m"));
        let args = delete_args(&["pod", "a", "--grace-period", "-1", "--force", "--wait"]);
        assert_eq!((args.grace_period, args.force, args.wait), (-1, true, true));
        // `--wait false` would read `false` as a second pod's name: the value needs `=`.
        assert_eq!(delete_args(&["pod", "a", "--wait", "b"]).target, ["pod", "a", "b"]);
        assert!(Cli::try_parse_from(["sheepctl", "delete", "pod", "a", "--wait=maybe"]).is_err());
        assert!(Cli::try_parse_from(["sheepctl", "delete", "pod", "a", "--grace-period=soon"]).is_err());
    }
}
