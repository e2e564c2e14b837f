import { chromium, type Browser } from 'playwright-core';

/** Headless Chromium for the Temporal UI tests (CHROMIUM_PATH, or the system's). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    // The machine has no network beyond loopback: keep Chromium from reaching out.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
