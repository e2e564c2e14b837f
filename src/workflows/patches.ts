import { patched } from '@temporalio/workflow';

/**
 * The register of patch ids (CONTRIBUTING.md, "Changing workflow code"). Every call of `patched` and `deprecatePatch`
 * under src/ names its id as a string literal, and the id is here at the step its call is at: test/patches.test.ts holds
 * the two together. A release adds at most one id (all of its command changes go under it), deprecates the one before
 * it, and removes the one before that.
 */

/** Where a patch is in its life, one release per step. */
export type PatchStep =
  /** Asked with `patched`, both branches kept: runs from the release before still replay. */
  | 'patched'
  /** `deprecatePatch('<id>')`, the old branch deleted: runs from the release that added it still replay. */
  | 'deprecated'
  /** No call left; the id stays here so that it is never used again. */
  | 'removed';

export interface Patch {
  /** Kebab-case, never reused. */
  readonly id: string;
  /** What runs on the new branch do differently: the commands that changed. */
  readonly change: string;
  /** The release that added the id (its `patched` call), e.g. `0.3.0`. One id per release. */
  readonly release: string;
  readonly step: PatchStep;
}

/** The patches of released code, oldest first (0.2.0 retired every patch made before a release). */
export const PATCHES: readonly Patch[] = [
  {
    id: 'release-0-3-0',
    change:
      'a failed provider-batch route still writes the sink; its parts settle before clean-up and a refused part fails alone; its hand-back to sync is a task file; a budget refuses the route (auto goes sync)',
    release: '0.3.0',
    step: 'patched',
  },
];

/** Whether this run takes 0.3.0's branches (`release-0-3-0`). */
export const patched030 = (): boolean => patched('release-0-3-0');

/**
 * The patch ids of the unreleased 0.1.0, the first 13 retired in 0.2.0 with their newest branch kept (CHANGELOG.md): no
 * release ever ran them, so they never enter PATCHES, but no patch may take their names again.
 */
export const RETIRED_UNRELEASED: readonly string[] = [
  'sub-agent-cancelled-alone',
  'failed-agent-spend',
  'agent-tools-settle',
  'agent-cancel-before-continue',
  'agent-id-escaped',
  'budget-stops-run',
  'provider-batch-continue-as-new',
  'provider-batch-anthropic-one-create',
  'provider-batch-retry-round',
  'stripe-lending',
  'window-progress-memo',
  'hand-over-freed-once',
  'batch-stripes',
  // Retired earlier in 0.1.0's development, when their workflow code was rewritten.
  'batch-progress-memo',
  'batch-chunks',
  'batch-deep-chunks',
  'window-wave-read-ahead',
];
