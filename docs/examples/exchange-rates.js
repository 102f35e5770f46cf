// Exchange rates every weekday morning, kept in kv: "rates:latest" and one key a day.
// The schedule's payload names the service: {"source": "https://api.frankfurter.app/latest?from=EUR"}.
export default async function (event) {
  const response = await fetch(event.payload.source);
  if (!response.ok) throw new Error(`the rates service answered ${response.status}`);  // the schedule retries
  const {base, date, rates} = await response.json();
  await almanac.kv.set(`rates:${base}:${date}`, rates);
  await almanac.kv.set("rates:latest", {base, date, rates});
  console.log(`${Object.keys(rates).length} rates for ${date}`);
  return {base, date, currencies: Object.keys(rates).length};
}
