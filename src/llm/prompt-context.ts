/** A resolved dependency output or synthesis section: the text read back from the store. */
export interface ResolvedOutput {
  id?: string;
  name: string;
  status?: string;
  output?: string;
  note?: string;
}

const TEMPLATE = /\{\{\s*deps\.([A-Za-z0-9._:@/-]+)\s*\}\}/g;

/**
 * The prompt a DAG node runs with: `{{deps.<id>}}` placeholders replaced by those dependencies' outputs, or, when the
 * prompt has none, the outputs appended as a context section.
 */
export function promptWithDependencies(prompt: string, dependencies: readonly ResolvedOutput[]): string {
  if (dependencies.length === 0) return prompt;
  const byId = new Map(dependencies.map((dependency) => [dependency.id, dependency]));
  if (new RegExp(TEMPLATE.source).test(prompt)) {
    return prompt.replace(new RegExp(TEMPLATE.source, 'g'), (_, id: string) => byId.get(id)?.output ?? '');
  }
  const context = dependencies.map((dependency) => `### ${dependency.name}\n${dependency.output ?? ''}`).join('\n\n');
  return `${prompt}\n\n## Results of the tasks this one depends on\n\n${context}`;
}

/** The synthesis prompt: the instructions, then every agent's output; failed agents appear as notes, not silently dropped. */
export function synthesisPrompt(instructions: string, sections: readonly ResolvedOutput[]): string {
  const parts = sections.map((section) =>
    section.status === undefined || section.status === 'ok'
      ? `## ${section.name}\n${section.output ?? ''}`
      : `## ${section.name}\n(note: this agent ${section.status}: ${section.note ?? 'no output'})`,
  );
  return `${instructions}\n\n${parts.join('\n\n')}`;
}
