import { readFileSync } from 'node:fs';
import type { Environment } from '../config/environment';
import { safeParse } from '../contract/validation';
import { BUILT_IN_PRICES, priceTableSchema, type PriceTable } from './price-table';

/** A price override that cannot be used. `variable` names the setting to fix; the worker does not start with it. */
export class PriceConfigError extends Error {
  constructor(
    readonly variable: 'FANOUT_PRICES' | 'FANOUT_PRICES_FILE',
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'PriceConfigError';
  }
}

const EXAMPLE = '{ "my-model": { "inputPerMillion": 0.5, "outputPerMillion": 1.5 } }';

/** Parses and validates one override's JSON text; every issue names the model and field. */
function parseTable(variable: PriceConfigError['variable'], text: string, where: string): PriceTable {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new PriceConfigError(variable, `${where} is not JSON (${(error as Error).message}); expected ${EXAMPLE}`);
  }
  const parsed = safeParse(priceTableSchema, json);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((issue) => {
      const [model, ...field] = issue.path.map(String);
      const at = model === undefined ? '' : `"${model}"${field.length > 0 ? `.${field.join('.')}` : ''}: `;
      return `${at}${issue.message}`;
    });
    throw new PriceConfigError(variable, `${where} is not a price table (${issues.join('; ')}); expected ${EXAMPLE}`);
  }
  return parsed.data;
}

/**
 * The price table a worker uses: the built-in list prices, overridden model by model by the JSON file named in
 * FANOUT_PRICES_FILE, then by the JSON in FANOUT_PRICES. Read once when the worker's activities are built, so a bad
 * override stops the worker at start, naming the variable, rather than failing calls later.
 */
export function pricesFromEnvironment(environment: Environment = process.env): PriceTable {
  let table: PriceTable = BUILT_IN_PRICES;
  const file = environment.FANOUT_PRICES_FILE?.trim();
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new PriceConfigError(
        'FANOUT_PRICES_FILE',
        `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      );
    }
    table = { ...table, ...parseTable('FANOUT_PRICES_FILE', text, file) };
  }
  const inline = environment.FANOUT_PRICES?.trim();
  if (inline) table = { ...table, ...parseTable('FANOUT_PRICES', inline, 'the value') };
  return table;
}
