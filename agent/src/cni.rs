//! The CNI protocol (spec 1.0), as a runtime speaks it: a plugin is an executable found on
//! the plugin path, told what to do by `CNI_*` environment variables and its network
//! configuration as JSON on stdin, answering with a result (or an error) as JSON on stdout.
//! A [`NetworkList`] runs its plugins in order on ADD, each given the result so far as
//! `prevResult`, and in reverse on DEL with the result ADD gave.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

/// The spec version Shepherd's network configurations are written in.
pub const VERSION: &str = "1.0.0";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CNI plugin {plugin:?} is not in {}", dirs_text(.dirs))]
    PluginMissing { plugin: String, dirs: Vec<PathBuf> },
    #[error("cannot run CNI plugin {plugin}: {source}")]
    Spawn { plugin: String, source: std::io::Error },
    #[error("CNI plugin {plugin} failed on {command}: {message} (code {code}){}", details_text(.details))]
    Plugin { plugin: String, command: &'static str, code: i64, message: String, details: String },
    #[error("CNI plugin {plugin} answered {command} with something that is not a result: {output:?}")]
    BadOutput { plugin: String, command: &'static str, output: String },
    #[error("a CNI plugin configuration needs a string \"type\": {0}")]
    NoType(Value),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn dirs_text(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
}

fn details_text(details: &str) -> String {
    if details.is_empty() { String::new() } else { format!(": {details}") }
}

/// `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Add,
    Del,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Add => "ADD",
            Operation::Del => "DEL",
        }
    }
}

/// The container a plugin acts on: `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`.
#[derive(Debug, Clone)]
pub struct Attachment<'a> {
    pub container_id: &'a str,
    /// The namespace's path; empty on a DEL whose namespace is gone (plugins then release
    /// what they hold outside it, such as the address).
    pub netns: &'a Path,
    pub ifname: &'a str,
}

/// Where plugins are looked for: `CNI_PATH`.
#[derive(Debug, Clone)]
pub struct PluginPath(pub Vec<PathBuf>);

impl PluginPath {
    /// The executable called `plugin`, from the first directory that has it.
    pub fn find(&self, plugin: &str) -> Result<PathBuf> {
        self.0
            .iter()
            .map(|dir| dir.join(plugin))
            .find(|path| path.is_file())
            .ok_or_else(|| Error::PluginMissing { plugin: plugin.to_string(), dirs: self.0.clone() })
    }

    fn env(&self) -> String {
        std::env::join_paths(&self.0).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// Runs one plugin: `config` on stdin, the `CNI_*` variables in its environment. Returns
/// what it printed as JSON (`Value::Null` when it printed nothing, as DEL may).
pub fn invoke(path: &PluginPath, operation: Operation, at: &Attachment<'_>, config: &Value) -> Result<Value> {
    let plugin = config.get("type").and_then(Value::as_str).ok_or_else(|| Error::NoType(config.clone()))?;
    let executable = path.find(plugin)?;
    let spawn_error = |source| Error::Spawn { plugin: plugin.to_string(), source };
    let mut child = Command::new(&executable)
        .env("CNI_COMMAND", operation.name())
        .env("CNI_CONTAINERID", at.container_id)
        .env("CNI_NETNS", at.netns)
        .env("CNI_IFNAME", at.ifname)
        .env("CNI_PATH", path.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let input = serde_json::to_vec(config).expect("a JSON value serializes");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&input).map_err(spawn_error)?;
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answer: Option<Value> = if stdout.trim().is_empty() { None } else { serde_json::from_str(&stdout).ok() };
    if !output.status.success() {
        // The spec's error: {"code", "msg", "details"} on stdout; some plugins only write stderr.
        let field = |name: &str| answer.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).unwrap_or_default().to_string();
        let mut message = field("msg");
        if message.is_empty() {
            message = String::from_utf8_lossy(&output.stderr).trim().to_string();
        }
        if message.is_empty() {
            message = format!("exited with {}", output.status);
        }
        return Err(Error::Plugin {
            plugin: plugin.to_string(),
            command: operation.name(),
            code: answer.as_ref().and_then(|a| a.get("code")).and_then(Value::as_i64).unwrap_or(-1),
            message,
            details: field("details"),
        });
    }
    match answer {
        Some(value) => Ok(value),
        None if stdout.trim().is_empty() => Ok(Value::Null),
        None => Err(Error::BadOutput { plugin: plugin.to_string(), command: operation.name(), output: stdout.into_owned() }),
    }
}

/// A network configuration list (a `.conflist`): a name and the plugins that set it up.
#[derive(Debug, Clone)]
pub struct NetworkList {
    pub name: String,
    pub plugins: Vec<Value>,
}

impl NetworkList {
    /// What plugin `index` is given: its own configuration with the list's `cniVersion` and
    /// `name`, the result so far, and the runtime's arguments it declared the capability for.
    fn plugin_config(&self, index: usize, prev_result: Option<&Value>, runtime_config: &Map<String, Value>) -> Value {
        let mut config = match &self.plugins[index] {
            Value::Object(fields) => fields.clone(),
            other => return other.clone(),
        };
        config.insert("cniVersion".to_string(), Value::from(VERSION));
        config.insert("name".to_string(), Value::from(self.name.clone()));
        if let Some(prev) = prev_result {
            config.insert("prevResult".to_string(), prev.clone());
        }
        let capabilities = config.get("capabilities").and_then(Value::as_object).cloned().unwrap_or_default();
        let granted: Map<String, Value> = runtime_config
            .iter()
            .filter(|(key, _)| capabilities.get(*key).and_then(Value::as_bool).unwrap_or(false))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !granted.is_empty() {
            config.insert("runtimeConfig".to_string(), Value::Object(granted));
        }
        Value::Object(config)
    }

    /// ADD: every plugin in order. Returns the last plugin's result. A failed ADD is undone
    /// with a DEL, as the spec asks of runtimes, before the error is returned.
    pub fn add(&self, path: &PluginPath, at: &Attachment<'_>, runtime_config: &Map<String, Value>) -> Result<Value> {
        let mut result: Option<Value> = None;
        for index in 0..self.plugins.len() {
            let config = self.plugin_config(index, result.as_ref(), runtime_config);
            match invoke(path, Operation::Add, at, &config) {
                Ok(Value::Null) => {}
                Ok(answer) => result = Some(answer),
                Err(e) => {
                    if let Err(undo) = self.del(path, at, result.as_ref(), runtime_config) {
                        tracing::warn!(network = %self.name, container = at.container_id, error = %undo, "cannot undo a failed CNI ADD");
                    }
                    return Err(e);
                }
            }
        }
        Ok(result.unwrap_or(Value::Null))
    }

    /// DEL: every plugin in reverse order, each given ADD's result. Plugins make DEL safe to
    /// repeat, and so is this.
    pub fn del(
        &self,
        path: &PluginPath,
        at: &Attachment<'_>,
        prev_result: Option<&Value>,
        runtime_config: &Map<String, Value>,
    ) -> Result<()> {
        for index in (0..self.plugins.len()).rev() {
            invoke(path, Operation::Del, at, &self.plugin_config(index, prev_result, runtime_config))?;
        }
        Ok(())
    }
}

/// The first address of a result that belongs to an interface inside the container (one
/// with a `sandbox`), without its prefix length: `10.77.0.5` from `10.77.0.5/16`.
pub fn container_address(result: &Value) -> Option<String> {
    let interfaces = result.get("interfaces").and_then(Value::as_array);
    let in_container = |index: Option<u64>| {
        let Some(interfaces) = interfaces else { return true };
        index
            .and_then(|i| interfaces.get(i as usize))
            .is_some_and(|interface| interface.get("sandbox").and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
    };
    result.get("ips")?.as_array()?.iter().find_map(|ip| {
        let address = ip.get("address")?.as_str()?;
        in_container(ip.get("interface").and_then(Value::as_u64)).then(|| address.split('/').next().unwrap_or(address).to_string())
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;

    /// A directory of fake plugins: shell scripts that log how they were called to `calls`
    /// and answer as they are told.
    struct Plugins {
        dir: tempfile::TempDir,
    }

    impl Plugins {
        fn new() -> Self {
            Plugins { dir: tempfile::tempdir().unwrap() }
        }

        /// A plugin that appends `NAME COMMAND CONTAINERID NETNS IFNAME` and its stdin to
        /// the log, then runs `answer` (shell).
        fn add(&self, name: &str, answer: &str) {
            let log = self.dir.path().join("calls");
            let script = format!(
                "#!/bin/sh\nread -r input\necho \"{name} $CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS $CNI_IFNAME $CNI_PATH\" >> {log}\n\
                 echo \"$input\" >> {log}\n{answer}\n",
                log = log.display()
            );
            let path = self.dir.path().join(name);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }

        fn path(&self) -> PluginPath {
            PluginPath(vec![self.dir.path().join("nowhere"), self.dir.path().to_path_buf()])
        }

        /// Each call: its environment line and the configuration it read.
        fn calls(&self) -> Vec<(String, Value)> {
            let text = std::fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines.chunks(2).map(|pair| (pair[0].to_string(), serde_json::from_str(pair[1]).unwrap())).collect()
        }
    }

    /// `first ADD` from a logged environment line.
    fn commands_of(env: &str) -> String {
        env.split(' ').take(2).collect::<Vec<_>>().join(" ")
    }

    const RESULT: &str = r#"{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/ns"}],"ips":[{"interface":1,"address":"10.77.0.9/16","gateway":"10.77.0.1"}]}"#;

    fn attachment(netns: &Path) -> Attachment<'_> {
        Attachment { container_id: "c0ffee", netns, ifname: "eth0" }
    }

    #[test]
    fn a_chain_adds_in_order_with_the_result_so_far_and_deletes_in_reverse_with_adds_result() {
        let plugins = Plugins::new();
        plugins.add("first", &format!("echo '{RESULT}'"));
        plugins.add("second", &format!("echo '{}'", RESULT.replace("10.77.0.9", "10.77.0.10")));
        let list = NetworkList {
            name: "pods".into(),
            plugins: vec![json!({"type": "first", "bridge": "br0"}), json!({"type": "second", "capabilities": {"portMappings": true}})],
        };
        let runtime = Map::from_iter([
            ("portMappings".to_string(), json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}])),
            ("bandwidth".to_string(), json!({})),
        ]);
        let netns = Path::new("/var/run/ns/x");
        let result = list.add(&plugins.path(), &attachment(netns), &runtime).unwrap();
        assert_eq!(container_address(&result).as_deref(), Some("10.77.0.10"), "the last plugin's result");
        list.del(&plugins.path(), &attachment(netns), Some(&result), &runtime).unwrap();

        let calls = plugins.calls();
        let order: Vec<String> = calls.iter().map(|(env, _)| commands_of(env)).collect();
        assert_eq!(order, ["first ADD", "second ADD", "second DEL", "first DEL"]);
        let dir = plugins.dir.path().display().to_string();
        assert_eq!(calls[0].0, format!("first ADD c0ffee /var/run/ns/x eth0 {dir}/nowhere:{dir}"));
        let (first_add, second_add) = (&calls[0].1, &calls[1].1);
        assert_eq!(first_add["cniVersion"], VERSION);
        assert_eq!(first_add["name"], "pods");
        assert_eq!(first_add["bridge"], "br0");
        assert!(first_add.get("prevResult").is_none(), "the first plugin has no result before it");
        assert!(first_add.get("runtimeConfig").is_none(), "no capability, no runtime arguments");
        assert_eq!(second_add["prevResult"], serde_json::from_str::<Value>(RESULT).unwrap());
        assert_eq!(second_add["runtimeConfig"], json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}));
        for (_, del) in &calls[2..] {
            assert_eq!(del["prevResult"], result, "DEL is given ADD's result");
        }
    }

    #[test]
    fn a_plugins_error_json_is_reported_and_a_failed_add_is_undone() {
        let plugins = Plugins::new();
        plugins.add("good", &format!("echo '{RESULT}'"));
        plugins.add(
            "bad",
            r#"[ "$CNI_COMMAND" = DEL ] && exit 0; echo '{"cniVersion":"1.0.0","code":11,"msg":"no more addresses","details":"range full"}'; exit 1"#,
        );
        let list = NetworkList { name: "pods".into(), plugins: vec![json!({"type": "good"}), json!({"type": "bad"})] };
        let error = list.add(&plugins.path(), &attachment(Path::new("/ns")), &Map::new()).unwrap_err();
        match &error {
            Error::Plugin { plugin, command, code, message, details } => {
                assert_eq!((plugin.as_str(), *command, *code), ("bad", "ADD", 11));
                assert_eq!((message.as_str(), details.as_str()), ("no more addresses", "range full"));
            }
            other => panic!("not a plugin error: {other:?}"),
        }
        assert_eq!(error.to_string(), "CNI plugin bad failed on ADD: no more addresses (code 11): range full");
        let commands: Vec<String> = plugins.calls().iter().map(|(env, _)| commands_of(env)).collect();
        assert_eq!(commands, ["good ADD", "bad ADD", "bad DEL", "good DEL"], "what ADD did is deleted again");
    }

    #[test]
    fn stderr_stands_in_for_a_missing_error_message_and_garbage_is_refused() {
        let plugins = Plugins::new();
        plugins.add("crash", "echo 'panic: nil map' >&2; exit 2");
        plugins.add("chatty", "echo 'hello'");
        plugins.add("quiet", "true");
        let at = attachment(Path::new("/ns"));
        let crash = invoke(&plugins.path(), Operation::Del, &at, &json!({"type": "crash"})).unwrap_err();
        assert!(matches!(&crash, Error::Plugin { message, code: -1, .. } if message == "panic: nil map"), "{crash:?}");
        let chatty = invoke(&plugins.path(), Operation::Add, &at, &json!({"type": "chatty"})).unwrap_err();
        assert!(matches!(chatty, Error::BadOutput { .. }), "{chatty:?}");
        assert_eq!(invoke(&plugins.path(), Operation::Del, &at, &json!({"type": "quiet"})).unwrap(), Value::Null);
        let missing = invoke(&plugins.path(), Operation::Add, &at, &json!({"type": "bridge"})).unwrap_err();
        assert!(missing.to_string().starts_with("CNI plugin \"bridge\" is not in "), "{missing}");
        assert!(matches!(invoke(&plugins.path(), Operation::Add, &at, &json!({"bridge": "x"})), Err(Error::NoType(_))));
    }

    #[test]
    fn the_container_address_is_the_first_on_an_interface_inside_the_container() {
        let result = json!({
            "interfaces": [{"name": "br0"}, {"name": "eth0", "sandbox": "/ns"}],
            "ips": [{"interface": 0, "address": "10.77.0.1/16"}, {"interface": 1, "address": "10.77.0.7/16"}],
        });
        assert_eq!(container_address(&result).as_deref(), Some("10.77.0.7"));
        assert_eq!(container_address(&json!({"ips": [{"address": "10.1.2.3/24"}]})).as_deref(), Some("10.1.2.3"));
        assert_eq!(container_address(&json!({"ips": []})), None);
        assert_eq!(container_address(&Value::Null), None);
    }
}
