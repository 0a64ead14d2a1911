// The editor's language intelligence for the agent: `agent/diagnostics` answers with what
// VS Code's other language extensions report (once they caught up with the latest change),
// `agent/lsp` runs a standard request through VS Code's `vscode.execute*Provider` commands.
// VS Code and agent-lsp both count columns in UTF-16 here, so positions pass unchanged.

import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import type { DiagnosticsParams, DiagnosticsResult, CodeRequestParams } from "./protocol";

/** How long diagnostics must stay unchanged to count as settled (a language server often
 *  publishes syntax problems first and semantic ones a moment later). */
const SETTLE_MS = 400;

export class LanguageIntelligence implements vscode.Disposable {
  private changed = new Map<string, number>();
  private published = new Map<string, number>();
  private subscriptions: vscode.Disposable[];

  constructor(private client: LanguageClient) {
    this.subscriptions = [
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.contentChanges.length) this.changed.set(e.document.uri.toString(), Date.now());
      }),
      vscode.languages.onDidChangeDiagnostics((e) => {
        for (const uri of e.uris) this.published.set(uri.toString(), Date.now());
      }),
    ];
  }

  dispose() {
    for (const s of this.subscriptions) s.dispose();
  }

  /** Every file's diagnostics are newer than its text and have settled. */
  private settled(uris: string[]): boolean {
    const now = Date.now();
    return uris.every((u) => {
      const changed = this.changed.get(u) ?? 0;
      const published = this.published.get(u) ?? 0;
      return published >= changed && now - published >= SETTLE_MS;
    });
  }

  async diagnostics(params: DiagnosticsParams): Promise<DiagnosticsResult> {
    const uris = (params?.uris ?? []).filter((u) =>
      vscode.workspace.textDocuments.some((d) => d.uri.toString() === vscode.Uri.parse(u).toString()),
    ).map((u) => vscode.Uri.parse(u).toString());
    const deadline = Date.now() + (params?.waitMs ?? 1500);
    while (params?.waitMs && !this.settled(uris) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const c2p = this.client.code2ProtocolConverter;
    const items = [];
    for (const u of uris) {
      const uri = vscode.Uri.parse(u);
      const own = new Set(this.client.diagnostics?.get(uri) ?? []);
      const theirs = vscode.languages.getDiagnostics(uri).filter((d) => !own.has(d));
      items.push({ uri: c2p.asUri(uri), diagnostics: (await c2p.asDiagnostics(theirs)) as unknown[] as Record<string, unknown>[] });
    }
    return { items } as DiagnosticsResult;
  }

  /** Runs a standard request through VS Code's providers; the answer in LSP's shape. */
  async request(req: CodeRequestParams): Promise<unknown> {
    const p = (req?.params ?? {}) as any;
    const uri = p.textDocument?.uri ? vscode.Uri.parse(p.textDocument.uri) : undefined;
    if (uri) await vscode.workspace.openTextDocument(uri);
    const pos = p.position ? new vscode.Position(p.position.line, p.position.character) : undefined;
    const c2p = this.client.code2ProtocolConverter;
    const run = <T>(command: string, ...args: unknown[]) =>
      vscode.commands.executeCommand<T>(command, ...args).then((r) => r ?? ([] as unknown as T));
    switch (req.method) {
      case "textDocument/definition":
        return links(await run("vscode.executeDefinitionProvider", uri, pos), c2p);
      case "textDocument/implementation":
        return links(await run("vscode.executeImplementationProvider", uri, pos), c2p);
      case "textDocument/references":
        return (await run<vscode.Location[]>("vscode.executeReferenceProvider", uri, pos)).map((l) => c2p.asLocation(l));
      case "textDocument/hover": {
        const hovers = await run<vscode.Hover[]>("vscode.executeHoverProvider", uri, pos);
        if (!hovers.length) return null;
        const value = hovers
          .flatMap((h) => h.contents)
          .map((c) => (typeof c === "string" ? c : "value" in c ? c.value : ""))
          .filter((s) => s)
          .join("\n\n");
        return { contents: { kind: "markdown", value } };
      }
      case "textDocument/documentSymbol":
        return symbols(await run("vscode.executeDocumentSymbolProvider", uri), c2p);
      case "workspace/symbol":
        return symbols(await run("vscode.executeWorkspaceSymbolProvider", p.query ?? ""), c2p);
      default:
        throw new Error(`agent/lsp: ${req.method} is not one VS Code runs`);
    }
  }
}

type C2P = LanguageClient["code2ProtocolConverter"];

function links(found: (vscode.Location | vscode.LocationLink)[], c2p: C2P) {
  return found.map((l) =>
    "targetUri" in l
      ? {
          targetUri: c2p.asUri(l.targetUri),
          targetRange: c2p.asRange(l.targetRange),
          targetSelectionRange: c2p.asRange(l.targetSelectionRange ?? l.targetRange),
        }
      : c2p.asLocation(l),
  );
}

// VS Code's SymbolKind counts from 0, LSP's from 1.
function symbols(found: (vscode.SymbolInformation | vscode.DocumentSymbol)[], c2p: C2P): unknown[] {
  return found.map((s) =>
    "location" in s
      ? { name: s.name, kind: s.kind + 1, location: c2p.asLocation(s.location) }
      : {
          name: s.name,
          kind: s.kind + 1,
          range: c2p.asRange(s.range),
          selectionRange: c2p.asRange(s.selectionRange),
          children: symbols(s.children ?? [], c2p),
        },
  );
}
