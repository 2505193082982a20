//! A pod's command box: pick a container, type a command, run it and read its output and
//! exit code, as `kubectl exec` shows them. The command runs as `sh -c`, so pipes and quotes
//! read as in a shell.

use std::rc::Rc;

use shared::api::paths;
use shared::model::Pod;
use shared::remote_command::Options;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use crate::api::{self, ExecOutput};
use crate::context::use_session;

/// One run: its output in the order it came (`true` for stderr), then how it ended.
#[derive(Debug, Clone, Default, PartialEq)]
struct Run {
    output: Vec<(bool, Vec<u8>)>,
    running: bool,
    end: Option<Result<i64, String>>,
}

enum RunAction {
    Start,
    Output(ExecOutput),
}

impl Reducible for Run {
    type Action = RunAction;

    fn reduce(self: Rc<Self>, action: RunAction) -> Rc<Self> {
        let mut run = (*self).clone();
        match action {
            RunAction::Start => run = Run { running: true, ..Run::default() },
            RunAction::Output(ExecOutput::Exit(end)) => {
                run.running = false;
                run.end = Some(end);
            }
            RunAction::Output(ExecOutput::Stdout(bytes)) => append(&mut run.output, false, bytes),
            RunAction::Output(ExecOutput::Stderr(bytes)) => append(&mut run.output, true, bytes),
        }
        Rc::new(run)
    }
}

/// Joins output to the last piece when it comes on the same stream, so a character split
/// between two messages reads whole.
fn append(output: &mut Vec<(bool, Vec<u8>)>, stderr: bool, bytes: Vec<u8>) {
    match output.last_mut() {
        Some((last, piece)) if *last == stderr => piece.extend(bytes),
        _ => output.push((stderr, bytes)),
    }
}

#[derive(Properties)]
pub struct CommandBoxProps {
    pub pod: Rc<Pod>,
}

impl PartialEq for CommandBoxProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.pod, &other.pod)
    }
}

#[component]
pub fn CommandBox(props: &CommandBoxProps) -> Html {
    let session = use_session();
    let pod = &props.pod;
    let container = use_state(|| pod.spec.containers.first().map(|c| c.name.clone()).unwrap_or_default());
    let command = use_state(String::new);
    let run = use_reducer(Run::default);
    let on_container = {
        let container = container.clone();
        Callback::from(move |e: Event| container.set(e.target_unchecked_into::<HtmlSelectElement>().value()))
    };
    let on_command = {
        let command = command.clone();
        Callback::from(move |e: InputEvent| command.set(e.target_unchecked_into::<HtmlInputElement>().value()))
    };
    let on_submit = {
        let (run, command, container) = (run.clone(), command.clone(), container.clone());
        let (namespace, name) = (pod.metadata.namespace.clone(), pod.metadata.name.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            if command.trim().is_empty() || run.running {
                return;
            }
            let options = Options {
                container: (*container).clone(),
                command: vec!["sh".into(), "-c".into(), (*command).clone()],
                stdout: true,
                stderr: true,
                ..Options::default()
            };
            let query: Vec<String> =
                options.to_query().iter().map(|(key, value)| format!("{key}={}", js_sys::encode_uri_component(value))).collect();
            let path = format!("{}?{}", paths::pod_exec(&namespace, &name), query.join("&"));
            run.dispatch(RunAction::Start);
            let to_run = run.clone();
            let on_output = Callback::from(move |output| to_run.dispatch(RunAction::Output(output)));
            if let Err(error) = api::exec(&session.client(), session.token.as_deref(), &path, on_output) {
                run.dispatch(RunAction::Output(ExecOutput::Exit(Err(error.to_string()))));
            }
        })
    };
    let end = match &run.end {
        None if run.running => html! { <p class="muted">{ "Running…" }</p> },
        None => html! {},
        Some(Ok(code)) => html! { <p data-testid="exec-exit" data-code={code.to_string()}>{ format!("exit code {code}") }</p> },
        Some(Err(message)) => html! { <p class="error" data-testid="exec-error">{ message.clone() }</p> },
    };
    html! {
        <section class="command-box" data-testid="command-box">
            <h2>{ "Run a command" }</h2>
            <form onsubmit={on_submit}>
                <select onchange={on_container} data-testid="exec-container">
                    { for pod.spec.containers.iter().map(|c| html! { <option value={c.name.clone()} selected={c.name == *container}>{ &c.name }</option> }) }
                </select>
                <input type="text" placeholder="sh -c: ls -l /tmp | head" value={(*command).clone()} oninput={on_command} data-testid="exec-command" />
                <button type="submit" disabled={run.running} data-testid="exec-run">{ "Run" }</button>
            </form>
            <pre class="log" data-testid="exec-output">
                { for run.output.iter().map(|(stderr, bytes)| html! {
                    <span class={classes!(stderr.then_some("stderr"))}>{ String::from_utf8_lossy(bytes).into_owned() }</span>
                }) }
            </pre>
            { end }
        </section>
    }
}
