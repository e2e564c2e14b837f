/**
 * Tool calling for the simulator, scripted by directives in the task's prompt (its first user message), so agents run
 * offline and deterministically:
 *
 * - `[[tool:search {"q":"temporal"}]]`: one model step that calls `search`; several calls in one step are separated by
 *   commas (`[[tool:search {"q":"a"}, tool:read {"url":"b"}]]`). Each directive is one step, in order.
 * - `[[repeat 50 tool:search {"q":"x"}]]`: the same step 50 times.
 * - `[[answer-json {"title":"x"}]]`: the final answer is this JSON text (structured output).
 * - `[[invalid-json 1]]`: the first final answer (or N) is not JSON; the next is the real one.
 *
 * Step k of a conversation answers directive k, counting the assistant messages with tool calls already in it; once
 * every step is taken the model answers, quoting the tool results it got. Sub-agents' prompts (inside the JSON of a
 * `spawn_agents` call) carry their own directives.
 */

interface Message {
  role?: string;
  content?: unknown;
  tool_calls?: { function?: { name?: string; arguments?: string } }[];
  tool_call_id?: string;
}

interface ScriptedCall {
  name: string;
  args: string;
}

export interface AgentScript {
  steps: ScriptedCall[][];
  answerJson?: string;
  invalidAnswers: number;
  /** The prompt without its directives. */
  text: string;
}

/** The end of the JSON value starting at `start` (an object or array), or -1 when it does not close. */
function endOfJson(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let index = start; index < text.length; index += 1) {
    const char = text[index];
    if (inString) {
      if (char === '\\') index += 1;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' || char === '[') depth += 1;
    else if (char === '}' || char === ']') {
      depth -= 1;
      if (depth === 0) return index + 1;
    }
  }
  return -1;
}

/** Reads `tool:name {json}[, tool:name {json}]…` from `start`; returns the calls and where they end. */
function readCalls(text: string, start: number): { calls: ScriptedCall[]; end: number } | undefined {
  const calls: ScriptedCall[] = [];
  let index = start;
  for (;;) {
    const match = /^\s*tool:([A-Za-z0-9_.-]+)\s*/.exec(text.slice(index));
    if (!match) return undefined;
    index += match[0].length;
    let args = '{}';
    if (text[index] === '{') {
      const end = endOfJson(text, index);
      if (end === -1) return undefined;
      args = text.slice(index, end);
      index = end;
    }
    calls.push({ name: match[1], args });
    const rest = /^\s*,/.exec(text.slice(index));
    if (!rest) return { calls, end: index };
    index += rest[0].length;
  }
}

/** The directives of a prompt, in order. A `[[` that starts no directive is left as text. */
export function parseAgentScript(prompt: string): AgentScript | undefined {
  const script: AgentScript = { steps: [], invalidAnswers: 0, text: '' };
  let found = false;
  let index = 0;
  while (index < prompt.length) {
    const open = prompt.indexOf('[[', index);
    if (open === -1) {
      script.text += prompt.slice(index);
      break;
    }
    script.text += prompt.slice(index, open);
    const body = open + 2;
    let end = -1;
    const repeat = /^repeat\s+(\d+)\s+/.exec(prompt.slice(body));
    const calls = readCalls(prompt, body + (repeat ? repeat[0].length : 0));
    if (calls && prompt.startsWith(']]', calls.end)) {
      for (let count = 0; count < (repeat ? Number(repeat[1]) : 1); count += 1) script.steps.push(calls.calls);
      end = calls.end + 2;
    } else if (prompt.startsWith('answer-json', body)) {
      const jsonStart = prompt.indexOf('{', body);
      const jsonEnd = jsonStart === -1 ? -1 : endOfJson(prompt, jsonStart);
      if (jsonEnd !== -1 && prompt.startsWith(']]', jsonEnd)) {
        script.answerJson = prompt.slice(jsonStart, jsonEnd);
        end = jsonEnd + 2;
      }
    } else {
      const invalid = /^invalid-json\s+(\d+)\]\]/.exec(prompt.slice(body));
      if (invalid) {
        script.invalidAnswers = Number(invalid[1]);
        end = body + invalid[0].length;
      }
    }
    if (end === -1) {
      script.text += '[[';
      index = body;
    } else {
      found = true;
      index = end;
    }
  }
  script.text = script.text.replace(/\s+/g, ' ').trim();
  return found ? script : undefined;
}

/** A chat completion body, as the simulator sends it. */
export interface ScriptedCompletion {
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  [field: string]: unknown;
}

function countTokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function textOf(message: Message): string {
  const calls = (message.tool_calls ?? [])
    .map((call) => `${call.function?.name ?? ''} ${call.function?.arguments ?? ''}`)
    .join(' ');
  return `${typeof message.content === 'string' ? message.content : ''} ${calls}`;
}

/**
 * The completion for a request whose task prompt holds directives, or undefined for any other request (the simulator
 * then answers its usual echo). Deterministic: the same conversation always gets the same answer.
 */
export function scriptedCompletion(
  body: { model?: string; messages?: Message[] },
  seq: number,
): ScriptedCompletion | undefined {
  const messages = body.messages ?? [];
  const first = messages.find((message) => message.role === 'user');
  const script = typeof first?.content === 'string' ? parseAgentScript(first.content) : undefined;
  if (!script) return undefined;
  const stepsTaken = messages.filter(
    (message) => message.role === 'assistant' && (message.tool_calls?.length ?? 0) > 0,
  ).length;
  const answersGiven = messages.filter(
    (message) => message.role === 'assistant' && (message.tool_calls?.length ?? 0) === 0,
  ).length;
  let message: object;
  let completionText: string;
  let finishReason: string;
  if (stepsTaken < script.steps.length) {
    const calls = script.steps[stepsTaken].map((call, index) => ({
      id: `call_${stepsTaken + 1}_${index + 1}`,
      type: 'function',
      function: { name: call.name, arguments: call.args },
    }));
    message = { role: 'assistant', content: null, tool_calls: calls };
    completionText = calls.map((call) => `${call.function.name} ${call.function.arguments}`).join(' ');
    finishReason = 'tool_calls';
  } else {
    if (answersGiven < script.invalidAnswers)
      completionText = `[simulated] an answer that is not JSON (${answersGiven + 1} of ${script.invalidAnswers})`;
    else if (script.answerJson !== undefined) completionText = script.answerJson;
    else {
      const results = messages
        .filter((entry) => entry.role === 'tool')
        .map((entry) => (typeof entry.content === 'string' ? entry.content.slice(0, 80) : ''));
      completionText = `[simulated] answer to: ${script.text.slice(0, 80)}${results.length > 0 ? ` (from ${results.length} tool results: ${results.join(' | ')})` : ''}`;
    }
    message = { role: 'assistant', content: completionText };
    finishReason = 'stop';
  }
  const promptTokens = messages.reduce((sum, entry) => sum + countTokens(textOf(entry)), 0);
  const completionTokens = countTokens(completionText);
  return {
    id: `chatcmpl-sim-${seq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model ?? 'sim-model',
    system_fingerprint: 'simulated',
    choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null }],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}
