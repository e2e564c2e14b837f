import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';

type History = temporal.api.history.v1.IHistory;

/**
 * The proto3 JSON of a history, the format `temporal workflow show --output json` and the UI's download write.
 *
 * Why not `historyToJSON`/`historyFromJSON` of @temporalio/common: with this lockfile npm installs two copies of
 * protobufjs 8 (one under @temporalio/common, one under @temporalio/proto, because gRPC's loader holds the top-level
 * slot with protobufjs 7), and the JSON codec of the first rejects the message types of the second ("type must be a
 * Type"); `Worker.runReplayHistories` hits the same error when handed JSON. So the JSON codec here is the one of the
 * protobufjs @temporalio/proto itself loads, whatever the layout, and replays are handed decoded histories.
 */
const protojson = require(
  require.resolve('protobufjs/ext/protojson', { paths: [path.dirname(require.resolve('@temporalio/proto'))] }),
) as {
  toJson(type: unknown, message: unknown): unknown;
  fromJson(type: unknown, json: unknown, options?: { ignoreUnknownFields?: boolean }): History | null;
};
const historyType = (patchProtobufRoot(proto) as unknown as { lookupType(name: string): unknown }).lookupType(
  'temporal.api.history.v1.History',
);

export function historyToJson(history: History): string {
  return `${JSON.stringify(protojson.toJson(historyType, proto.temporal.api.history.v1.History.fromObject(history)), null, 2)}\n`;
}

export function historyFromJson(text: string): History {
  // Tolerates fields a newer server or SDK added, as the SDK's own loader does.
  const history = protojson.fromJson(historyType, JSON.parse(text), { ignoreUnknownFields: true });
  if (!history?.events?.length) throw new TypeError('not a workflow history: no events');
  return history;
}

export function readHistory(file: string): History {
  try {
    return historyFromJson(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
