/**
 * What `promise` rejects with, asserted to be a `type`: the test fails if it resolves or rejects with something else.
 *
 * @example
 * expect((await rejectionOf(storage.readRange(missing, 0, 10), StorageError)).code).toBe('NotFound');
 */
export async function rejectionOf<T>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}
