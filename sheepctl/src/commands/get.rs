//! `sheepctl get KIND [NAME]`: tables, `-o wide|json|yaml|name`, `-l SELECTOR`, and `-w`,
//! which keeps printing each change from the watch stream, one row per change. A table or
//! names are listed in pages of `--chunk-size` (500, kubectl's), each printed as it arrives.

use anyhow::{Result, bail};
use shared::api::{List, WatchEventType};
use shared::model::{Kind, Object, Pod, Resource};
use shared::selector::LabelSelector;
use shared::usage::requested_by_node;
use shepherd_client::Selection;

use super::context::Context;
use super::output::{print, serialized};
use crate::cli::{GetArgs, OutputFormat};
use crate::settings::{self, kind_word};
use crate::table::{self, Table};
use crate::view::{self, RowContext};
use shared::readiness::NodeJudge;

/// What to show: a kind, and optionally one name, or a label selector and a field selector
/// (which the server evaluates); a list in pages of `chunk_size` objects (0: one list).
#[derive(Debug, Clone)]
pub struct Query {
    pub kind: Kind,
    pub name: Option<String>,
    pub selector: Option<LabelSelector>,
    pub fields: Option<String>,
    pub chunk_size: usize,
}

pub async fn run(context: &Context, args: &GetArgs) -> Result<()> {
    let (kind, name) = if args.kind.contains('/') {
        if args.name.is_some() {
            bail!("give either KIND/NAME or KIND NAME, not both");
        }
        let (kind, name) = settings::targets(std::slice::from_ref(&args.kind))?.remove(0);
        (kind, Some(name))
    } else {
        (settings::kind(&args.kind)?, args.name.clone())
    };
    let selector = parse_selector(args.selector.as_deref())?;
    let fields = args.field_selector.clone().filter(|f| !f.trim().is_empty());
    if name.is_some() && (selector.is_some() || fields.is_some()) {
        bail!("a NAME and a selector both select objects: give one of them");
    }
    show(context, Query { kind, name, selector, fields, chunk_size: args.chunk_size }, args.output, args.watch).await
}

pub fn parse_selector(text: Option<&str>) -> Result<Option<LabelSelector>> {
    match text {
        None => Ok(None),
        Some(text) => Ok(Some(LabelSelector::parse(text)?)),
    }
}

/// Lists (or gets) and prints, then with `watch` prints every change until interrupted.
pub async fn show(context: &Context, query: Query, output: Option<OutputFormat>, watch: bool) -> Result<()> {
    let settings = &context.settings;
    let kind = query.kind;
    let scope = if kind.namespaced() { settings.list_scope() } else { None };
    let mut watcher = context.changes(kind, scope, query.selector.clone(), query.fields.clone());
    if let Some(name) = &query.name {
        watcher = watcher.named(name);
    }

    let mut row_context = RowContext {
        now: context.now(),
        wide: output == Some(OutputFormat::Wide),
        all_namespaces: scope.is_none() && kind.namespaced(),
        node_usage: None,
        nodes: NodeJudge::default(),
    };
    if kind == Kind::Node && matches!(output, None | Some(OutputFormat::Wide)) {
        row_context.nodes = context.node_judge().await?;
        if !watch {
            // One node's columns need its pods alone: the server selects them, where the whole
            // list of a large cluster is megabytes (12 MB at 12,000 pods, 0.7 s a call).
            let fields = query.name.as_ref().map(|node| format!("spec.node_name={node}"));
            let pods = context.client.list_objects(Kind::Pod, &Selection { field_selector: fields, ..Selection::default() }).await?;
            row_context.node_usage = Some(requested_by_node(pods.items.iter().filter_map(Pod::from_object)));
        }
    }

    // Events print in the order they happened, which needs them all; the rest print in the
    // server's list order, a page at a time.
    let pages = query.name.is_none() && !watch && query.chunk_size > 0 && kind != Kind::Event;
    if pages && matches!(output, None | Some(OutputFormat::Wide) | Some(OutputFormat::Name)) {
        let selection = super::context::selection(kind, scope, &query.selector.clone().unwrap_or_default(), query.fields.clone());
        return print_pages(context, kind, &selection, query.chunk_size, output, &row_context).await;
    }
    let (mut objects, list_kind, resource_version) = match (&query.name, watch) {
        (Some(name), false) if scope.is_some() || !kind.namespaced() => {
            let object = context.client.get_object(kind, &settings.namespace, name).await?;
            let rv = object.metadata().resource_version;
            (vec![object], String::new(), rv)
        }
        _ => {
            let objects = watcher.list().await?;
            (objects, format!("{}List", kind.as_str()), watcher.resource_version())
        }
    };
    if let (Some(name), true) = (&query.name, objects.is_empty()) {
        bail!("{} {name:?} not found{}", kind_word(kind), where_(context, kind));
    }
    sort(kind, &mut objects);

    let single = query.name.is_some() && !watch;
    let widths = match output {
        None | Some(OutputFormat::Wide) if watch => {
            let mut table = Table::new(std::iter::once("EVENT").chain(view::headers(kind, &row_context)));
            for object in &objects {
                table.push(watch_row("ADDED", object, &row_context));
            }
            let mut widths = table.widths();
            // Room for MODIFIED and DELETED, which come later.
            widths[0] = widths[0].max("MODIFIED".len());
            let mut text = table::line(&table.headers, &widths);
            for row in &table.rows {
                text.push_str(&table::line(row, &widths));
            }
            print(&text)?;
            widths
        }
        None | Some(OutputFormat::Wide) => {
            if objects.is_empty() {
                eprintln!("No {} found{}.", kind.plural(), where_(context, kind));
                return Ok(());
            }
            print(&view::table(kind, &objects, &row_context).render())?;
            Vec::new()
        }
        Some(OutputFormat::Name) => {
            print(&objects.iter().map(|o| view::object_name(o) + "\n").collect::<String>())?;
            Vec::new()
        }
        Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) if single => {
            print(&serialized(&objects[0], format)?)?;
            Vec::new()
        }
        Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) if !watch => {
            print(&serialized(&List::whole(list_kind, resource_version, objects), format)?)?;
            Vec::new()
        }
        Some(format) => {
            print(&objects.iter().map(|o| event_line(WatchEventType::Added, o, format)).collect::<Result<String>>()?)?;
            Vec::new()
        }
    };
    if !watch {
        return Ok(());
    }

    loop {
        let change = watcher.next().await?;
        row_context.now = context.now();
        let text = match output {
            None | Some(OutputFormat::Wide) => table::line(&watch_row(event_word(change.type_), &change.object, &row_context), &widths),
            Some(OutputFormat::Name) => format!("{}\n", view::object_name(&change.object)),
            Some(format) => event_line(change.type_, &change.object, format)?,
        };
        print(&text)?;
    }
}

/// Lists in pages of `chunk_size` and prints each as it comes: a table's header once, its
/// columns as wide as the widest cell so far (kubectl's remembered widths), or names.
async fn print_pages(
    context: &Context,
    kind: Kind,
    selection: &Selection,
    chunk_size: usize,
    output: Option<OutputFormat>,
    row_context: &RowContext,
) -> Result<()> {
    let (mut token, mut widths, mut printed) = (None::<String>, Vec::new(), false);
    loop {
        let page = context.client.list_page(kind, selection, chunk_size, token.as_deref()).await?;
        let text = match output {
            Some(OutputFormat::Name) => page.items.iter().map(|o| view::object_name(o) + "\n").collect::<String>(),
            _ if page.items.is_empty() => String::new(),
            _ => {
                let table = view::table(kind, &page.items, row_context);
                widths = table.widths_after(&widths);
                let mut text = if printed { String::new() } else { table::line(&table.headers, &widths) };
                for row in &table.rows {
                    text.push_str(&table::line(row, &widths));
                }
                text
            }
        };
        print(&text)?;
        printed |= !page.items.is_empty();
        match page.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    if !printed && output != Some(OutputFormat::Name) {
        eprintln!("No {} found{}.", kind.plural(), where_(context, kind));
    }
    Ok(())
}

fn event_word(type_: WatchEventType) -> &'static str {
    match type_ {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
        WatchEventType::Bookmark => "BOOKMARK",
    }
}

fn watch_row(event: &str, object: &Object, context: &RowContext) -> Vec<String> {
    std::iter::once(event.to_string()).chain(view::row(object, context)).collect()
}

/// A watched change as JSON (one compact line, for `jq`) or as a YAML document.
fn event_line(type_: WatchEventType, object: &Object, format: OutputFormat) -> Result<String> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        type_: WatchEventType,
        object: &'a Object,
    }
    let line = Line { type_, object };
    Ok(match format {
        OutputFormat::Yaml => format!("---\n{}", serde_norway::to_string(&line)?),
        _ => serde_json::to_string(&line)? + "\n",
    })
}

/// ` in namespace "default"`, or nothing for cluster-scoped kinds and `-A`.
fn where_(context: &Context, kind: Kind) -> String {
    match context.settings.list_scope() {
        Some(ns) if kind.namespaced() => format!(" in namespace {ns:?}"),
        _ => String::new(),
    }
}

fn sort(kind: Kind, objects: &mut [Object]) {
    if kind == Kind::Event {
        view::sort_events(objects);
    } else {
        objects.sort_by(|a, b| (&a.metadata().namespace, &a.metadata().name).cmp(&(&b.metadata().namespace, &b.metadata().name)));
    }
}
