"""Table preprocessing the table engines share: numbers imputed (with missing indicators) and quantile-normalised,
optionally spline-expanded; categories one-hot encoded."""
from __future__ import annotations

import pandas as pd


def categorical(x: pd.DataFrame) -> list[str]:
    """Columns that are not numbers: categories, strings."""
    return [c for c in x.columns if not pd.api.types.is_numeric_dtype(x[c]) and not pd.api.types.is_bool_dtype(x[c])]


def as_strings(x: pd.DataFrame) -> pd.DataFrame:
    """Category columns as plain strings, missing as 'missing' (the imputer and encoder want no NaN there)."""
    x = x.copy()
    for c in categorical(x):
        x[c] = x[c].astype(object).where(x[c].notna(), "missing").astype(str)
    return x


def table_preprocessing(splines: bool):
    """Impute, quantile-normalise (and spline-expand) numbers; one-hot encode categories (the columns of each kind
    are found when it is fitted)."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, QuantileTransformer, SplineTransformer

    steps = [SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
             QuantileTransformer(n_quantiles=200, output_distribution="normal")]
    if splines:
        steps.append(SplineTransformer(n_knots=4, degree=2))
    columns = ColumnTransformer([
        ("numbers", make_pipeline(*steps), make_column_selector(dtype_include="number")),
        ("categories", OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=3, max_categories=30,
                                     sparse_output=False), make_column_selector(dtype_exclude="number")),
    ])
    return make_pipeline(FunctionTransformer(as_strings), columns)
