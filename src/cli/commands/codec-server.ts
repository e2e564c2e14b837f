import { Command } from 'commander';
import { codecFromEnvironment, DEFAULT_CODEC_CORS_ORIGINS, startCodecServer } from '../../codec';
import { CliError, ExitCode } from '../errors';
import { wholeNumber } from '../options';

interface CodecServerFlags {
  port: number;
  host: string;
  corsOrigin?: string[];
  quiet?: boolean;
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function codecServerCommand(): Command {
  return new Command('codec-server')
    .description(
      'serve the payload codec over HTTP so the Temporal Web UI (--ui-codec-endpoint) and CLI (--codec-endpoint) show ' +
        'decrypted payloads; keys from FANOUT_ENCRYPTION_KEYS (or FANOUT_ENCRYPTION_KEY + FANOUT_ENCRYPTION_KEY_ID)',
    )
    .option('--port <port>', 'port to listen on', wholeNumber(0, 65535), 8888)
    .option('--host <host>', 'address to listen on; anyone who reaches it can decrypt', '127.0.0.1')
    .option(
      '--cors-origin <origin>',
      `browser origin of the Web UI allowed to call, repeatable; "*" for any (default ${DEFAULT_CODEC_CORS_ORIGINS.join(', ')})`,
      collect,
    )
    .option('--quiet', 'do not log each request')
    .action(async (flags: CodecServerFlags) => {
      const codec = codecFromEnvironment();
      if (codec === undefined) {
        throw new CliError(
          'no encryption key is configured: set FANOUT_ENCRYPTION_KEYS="<id>:<base64 key>,..." (or FANOUT_ENCRYPTION_KEY and FANOUT_ENCRYPTION_KEY_ID), the same keys the workers use',
          ExitCode.badInput,
        );
      }
      const corsOrigins = flags.corsOrigin ?? [...DEFAULT_CODEC_CORS_ORIGINS];
      const server = await startCodecServer({
        codec,
        host: flags.host,
        port: flags.port,
        corsOrigins,
        ...(flags.quiet ? {} : { log: (line: string) => process.stderr.write(`codec-server: ${line}\n`) }),
      });
      process.stderr.write(
        `codec server listening: ${server.url} (encrypts with key "${codec.encryptingKeyId}", decrypts ${codec.keyIds.join(', ')}; ` +
          `browser origins ${corsOrigins.join(', ')})\n` +
          `  Web UI: temporal server start-dev --ui-codec-endpoint ${server.url}   CLI: temporal workflow show --codec-endpoint ${server.url} ...\n`,
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await server.close();
    });
}
