// The memory inspector: a tree view of the workspace's facts (by tier, each with its
// provenance as children, conflicted ones flagged), with edit, forget and why on a fact —
// from the row's inline buttons, its context menu, or the command palette on the selected
// fact. Everything goes through agent/memory/*.

import * as vscode from "vscode";
import type { FactItem, Method, Params, Result } from "./protocol";
import { explain, factRow, groups, provenance, summary, type TierGroup } from "./memory";

export interface MemoryHost {
  request<M extends Method>(method: M, params: Params<M>): Promise<Result<M>>;
}

type Node =
  | { kind: "tier"; group: TierGroup }
  | { kind: "fact"; fact: FactItem }
  | { kind: "detail"; text: string; fact: FactItem };

export class MemoryView implements vscode.TreeDataProvider<Node> {
  static readonly id = "agent-lsp.memory";
  private facts: FactItem[] = [];
  private changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly tree: vscode.TreeView<Node>;

  constructor(
    context: vscode.ExtensionContext,
    private host: MemoryHost,
  ) {
    this.tree = vscode.window.createTreeView(MemoryView.id, { treeDataProvider: this, showCollapseAll: true });
    const command = (name: string, fn: (node?: Node) => unknown) =>
      context.subscriptions.push(vscode.commands.registerCommand(name, fn));
    command("agent-lsp.memory.refresh", () => this.refresh());
    command("agent-lsp.memory.edit", (node) => this.edit(node));
    command("agent-lsp.memory.forget", (node) => this.forget(node));
    command("agent-lsp.memory.why", (node) => this.why(node));
    context.subscriptions.push(this.tree, this.changed);
    // Facts change behind the view (the agent writes, a dream runs): reload when shown.
    this.tree.onDidChangeVisibility((e) => e.visible && void this.refresh());
  }

  async refresh() {
    try {
      this.facts = (await this.host.request("agent/memory/list", {})).facts;
    } catch (e: any) {
      this.facts = [];
      this.tree.message = `agent-lsp: ${e?.message ?? e}`;
      this.changed.fire(undefined);
      return;
    }
    this.tree.message = this.facts.length ? summary(this.facts) : "No facts yet: the agent and its dreams write them.";
    this.changed.fire(undefined);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case "tier": {
        const item = new vscode.TreeItem(node.group.label, vscode.TreeItemCollapsibleState.Expanded);
        item.contextValue = "tier";
        return item;
      }
      case "fact": {
        const row = factRow(node.fact);
        const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = node.fact.id;
        item.description = row.description;
        item.tooltip = new vscode.MarkdownString(
          [node.fact.content, "", ...provenance(node.fact).map((l) => `- ${l}`)].join("\n"),
        );
        item.iconPath = new vscode.ThemeIcon(row.conflicted ? "warning" : "note");
        item.contextValue = row.conflicted ? "fact.conflicted" : "fact";
        return item;
      }
      case "detail": {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        if (node.text.startsWith("in conflict")) item.iconPath = new vscode.ThemeIcon("warning");
        item.contextValue = "detail";
        return item;
      }
    }
  }

  getChildren(node?: Node): Node[] {
    if (!node) return groups(this.facts).map((group) => ({ kind: "tier", group }));
    if (node.kind === "tier") return node.group.facts.map((fact) => ({ kind: "fact", fact }));
    if (node.kind === "fact") {
      const fact = node.fact;
      return provenance(fact).map((text) => ({ kind: "detail", text, fact }));
    }
    return [];
  }

  /** The fact a command is about: the row it was run on, else the selected one. */
  private target(node?: Node): FactItem | undefined {
    const picked = node ?? this.tree.selection[0];
    // A provenance line stands for its fact.
    if (picked?.kind === "fact" || picked?.kind === "detail") return picked.fact;
    vscode.window.showInformationMessage("agent-lsp: select a fact in the Memory view first");
    return undefined;
  }

  private async run(what: () => Promise<unknown>) {
    try {
      await what();
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
    await this.refresh();
  }

  async edit(node?: Node) {
    const fact = this.target(node);
    if (!fact) return;
    const content = await vscode.window.showInputBox({
      title: "Edit the fact",
      value: fact.content,
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : "a fact needs some text"),
    });
    if (content === undefined || content === fact.content) return;
    await this.run(() => this.host.request("agent/memory/update", { id: fact.id, content }));
  }

  async forget(node?: Node) {
    const fact = this.target(node);
    if (!fact) return;
    const choice = await vscode.window.showWarningMessage(
      "Forget this fact?",
      { modal: true, detail: fact.content },
      "Forget",
    );
    if (choice !== "Forget") return;
    await this.run(() => this.host.request("agent/memory/forget", { id: fact.id }));
  }

  async why(node?: Node) {
    const fact = this.target(node);
    if (!fact) return;
    const query = await vscode.window.showInputBox({
      title: "Why would this fact surface (or not) for a prompt?",
      placeHolder: "a prompt",
      ignoreFocusOut: true,
    });
    if (!query) return;
    try {
      const why = await this.host.request("agent/memory/why", { id: fact.id, query });
      const [verdict, ...rest] = explain(why);
      await vscode.window.showInformationMessage(verdict, { modal: true, detail: rest.join("\n") });
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }
}
